#!/usr/bin/env bash
# Build maitre's wheel, install it into a fresh venv once per documented extra set, and run
# scripts/wheel_smoke.py in each: what `pip install maitre[...]` gives a new user, not what the
# development venv happens to hold. Packages come from the package index pip is configured with.
#
#   bash scripts/wheel_smoke.sh                  # the sets: core embeddings mcp all
#   WHEEL_SMOKE_SETS="core" bash scripts/wheel_smoke.sh
#
# Needs `build` (in maitre[dev]); PY is the interpreter that builds, BASE_PY the one the venvs copy.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
PY=${PY:-.venv/bin/python}
BASE_PY=${BASE_PY:-python3}
sets=${WHEEL_SMOKE_SETS:-core embeddings mcp all}
work=$(mktemp -d "${TMPDIR:-/tmp}/maitre-wheel-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
quiet() { grep -v "is ignored: it is neither" || true; }

start=$SECONDS
"$PY" -m build --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/maitre-*.whl)
echo "wheel smoke: built $(basename "$wheel") in $((SECONDS - start)) s"

status=0
for set in $sets; do
  t=$SECONDS
  venv="$work/venv-$set"
  "$BASE_PY" -m venv "$venv"
  spec=$wheel
  [ "$set" = core ] || spec="$wheel[$set]"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$spec" 2>&1 | quiet
  # From outside the source tree, so only the installed wheel can be imported.
  if (cd "$work" && "$venv/bin/python" "$repo/scripts/wheel_smoke.py" "$set"); then
    echo "wheel smoke [$set]: passed in $((SECONDS - t)) s"
  else
    echo "wheel smoke [$set]: FAILED (after $((SECONDS - t)) s)" >&2
    status=1
  fi
  rm -rf "$venv"
done
echo "wheel smoke: $sets in $((SECONDS - start)) s"
exit $status
