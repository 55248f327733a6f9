"""Smoke test of an installed maitre wheel: run by scripts/wheel_smoke.sh inside a fresh venv.

    venv/bin/python scripts/wheel_smoke.py core|embeddings|mcp|all

The argument says which extras were installed, so the script knows what must work and what must
fail with the one-line `pip install 'maitre[...]'` error. It checks, as a new user would meet them:

- the console script: `maitre --help` and `maitre --version` exit 0 without a traceback;
- the wheel's contents: `py.typed`, the shipped tokenizer with its licence;
- a governed call through `Gate`: a write tool with an idempotency key runs once, the retry is a
  replay, a bad call is a teaching error, and the audit chain verifies (SQLite; Postgres too in
  `all` when a server answers on 127.0.0.1:5432);
- tool search and memory: with `embeddings`, dense ranking by the real MiniLM (a query that shares no
  word with its tool or fact still finds it); without, words only, and exactly one notice line on
  stderr naming `pip install 'maitre[embeddings]'`;
- every extra: installed ones import, missing ones say which extra to install (and only those).

Each failure is printed; the exit status is 1 if any check failed. Run from outside the source
tree (the shell script does), so only the installed wheel can be imported.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Callable
from pathlib import Path

SETS: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "embeddings": frozenset({"embeddings"}),
    "mcp": frozenset({"mcp"}),
    "all": frozenset({"postgres", "redis", "mcp", "embeddings", "anthropic", "openai", "otel", "console", "durable"}),
}
NOTICE = "pip install 'maitre[embeddings]'"

failures: list[str] = []


def check(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Run the decorated function now; record a failure (with its traceback) instead of stopping."""

    def run(fn: Callable[[], None]) -> Callable[[], None]:
        try:
            fn()
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            print(f"FAIL {name}\n{textwrap.indent(traceback.format_exc(), '    ')}", file=sys.stderr)
        else:
            print(f"ok   {name}")
        return fn

    return run


def expect(condition: object, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("maitre")
    expect(exe.is_file(), f"no console script at {exe}")
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    expect("Traceback" not in done.stderr, f"maitre {' '.join(args)} printed a traceback:\n{done.stderr}")
    return done


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new interpreter of this venv (so a once-per-process notice can be counted)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def one_line_error(fn: Callable[[], object], extra: str) -> None:
    """`fn` must raise an ImportError whose message is one line naming `pip install 'maitre[extra]'`."""
    try:
        fn()
    except ImportError as exc:
        text = str(exc)
        expect(f"pip install 'maitre[{extra}]'" in text, f"the error does not name the extra: {text!r}")
        expect("\n" not in text.strip(), f"the error is not one line: {text!r}")
    else:
        raise AssertionError(f"expected an ImportError naming maitre[{extra}], got none")


def main(which: str) -> int:
    extras = SETS[which]
    print(f"wheel smoke [{which}] with {sys.executable}")

    @check("maitre is the installed wheel, not a source tree")
    def _installed() -> None:
        import maitre

        expect(Path(maitre.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), maitre.__file__)

    @check("the wheel ships py.typed and the tokenizer with its licence")
    def _files() -> None:
        import maitre

        root = Path(maitre.__file__).parent
        for rel in ("py.typed", "data/minilm/tokenizer.json", "data/minilm/LICENSE"):
            expect((root / rel).is_file(), f"{rel} is missing from the installed package")
        expect(
            "Apache License" in (root / "data/minilm/LICENSE").read_text(), "the licence is not Apache-2.0"
        )

    @check("maitre --help exits 0")
    def _help() -> None:
        done = run_cli("--help")
        expect(done.returncode == 0, f"exit {done.returncode}: {done.stderr.strip()[-500:]}")
        for command in ("demo", "serve", "tools", "audit", "approvals", "runs"):
            expect(command in done.stdout, f"--help does not list {command!r}")

    @check("maitre --version exits 0 and prints the version")
    def _version() -> None:
        done = run_cli("--version")
        expect(done.returncode == 0, f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
        expect(importlib.metadata.version("maitre") in done.stdout, f"got {done.stdout!r}")

    @check("a governed write runs once per idempotency key, refuses bad input, audits (SQLite)")
    def _gate_sqlite() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(governed_call(str(Path(tmp) / "smoke.db")))

    if "postgres" in extras and _reachable(5432):

        @check("the same governed write on Postgres stores")
        def _gate_postgres() -> None:
            asyncio.run(governed_call_postgres())

    @check("tool search ranks " + ("by meaning (hybrid)" if "embeddings" in extras else "by words only"))
    def _search() -> None:
        tool_search(dense="embeddings" in extras)

    @check("memory retrieves " + ("by meaning" if "embeddings" in extras else "by words only"))
    def _memory() -> None:
        memory(dense="embeddings" in extras)

    @check("the lexical-only notice: " + ("never" if "embeddings" in extras else "exactly one line"))
    def _notice() -> None:
        notice(expected="embeddings" not in extras)

    @check("installed extras are complete, missing ones are really missing")
    def _extras() -> None:
        from maitre._extras import EXTRAS, missing_modules

        for extra in EXTRAS:
            missing = missing_modules(extra)
            if extra in extras:
                expect(not missing, f"maitre[{extra}] is installed but {missing} are missing")
            else:
                expect(missing, f"maitre[{extra}] was not asked for but all of its modules are installed")

    if "embeddings" not in extras:

        @check("MiniLMEmbedder without the extra: one line naming maitre[embeddings]")
        def _no_embeddings() -> None:
            from maitre.embeddings import MiniLMEmbedder

            one_line_error(lambda: MiniLMEmbedder().embed(["hello"]), "embeddings")

    if "mcp" in extras:

        @check("MCP: from maitre.mcp import MCPApp, and `maitre serve --help`")
        def _mcp() -> None:
            from maitre import Toolbox
            from maitre.mcp import MCPApp

            box = Toolbox("smoke")

            @box.tool
            def ping() -> str:
                """Answer pong."""
                return "pong"

            MCPApp(box)
            done = run_cli("serve", "--help")
            expect(done.returncode == 0, f"exit {done.returncode}: {done.stderr.strip()[-300:]}")

    else:

        @check("MCP without the extra: one line naming maitre[mcp]")
        def _no_mcp() -> None:
            one_line_error(lambda: importlib.import_module("maitre").MCPApp, "mcp")
            one_line_error(lambda: importlib.import_module("maitre.mcp").MCPApp, "mcp")

    for extra, module in (
        ("postgres", "maitre.storage.engine.postgres"),
        ("redis", "maitre.storage.engine.redis"),
        ("anthropic", "maitre.models.anthropic"),
        ("openai", "maitre.models.openai"),
        ("otel", "opentelemetry.sdk.trace"),
        ("console", "maitre.console.app"),
        ("durable", "maitre.durable"),
    ):
        if extra in extras:

            @check(f"maitre[{extra}]: {module} imports")
            def _present(module: str = module) -> None:
                importlib.import_module(module)

        elif extra in ("postgres", "redis"):

            @check(f"{module} without maitre[{extra}]: one line naming it")
            def _absent(module: str = module, extra: str = extra) -> None:
                one_line_error(lambda: importlib.import_module(module), extra)

    if failures:
        print(f"\nwheel smoke [{which}]: {len(failures)} check(s) FAILED:", file=sys.stderr)
        for failure in failures:
            print(f"  - {failure.splitlines()[0][:300]}", file=sys.stderr)
        return 1
    print(f"wheel smoke [{which}]: all checks passed")
    return 0


async def governed_call(url: str) -> None:
    from maitre import CallOptions, Gate, Principal, Toolbox, ToolCall
    from maitre.audit import verify_store
    from maitre.stores import open_stores

    box = Toolbox("notes")
    written: list[str] = []

    @box.tool(effect="write", risk="low")
    def add_note(text: str) -> str:
        """Save a short note for the user."""
        written.append(text)
        return f"saved note {len(written)}"

    stores = await open_stores(url)
    try:
        gate = Gate(box, stores=stores)
        who = Principal(user="smoke", tenant="acme")
        call = ToolCall(id="c1", name="notes.add_note", arguments={"text": "buy milk"})
        first = await gate.call(call, who, options=CallOptions(idempotency_key="smoke-1"))
        expect(not first.is_error, f"the write failed: {first.content}")
        again = await gate.call(
            ToolCall(id="c2", name="notes.add_note", arguments={"text": "buy milk"}),
            who,
            options=CallOptions(idempotency_key="smoke-1"),
        )
        expect(not again.is_error and again.replayed, f"the retry was not a replay: {again.to_dict()}")
        expect(written == ["buy milk"], f"the tool ran {len(written)} times for one key")
        bad = await gate.call(ToolCall(id="c3", name="notes.add_note", arguments={"text": 3}), who)
        expect(bad.is_error and bad.error is not None and bad.error.code == "INVALID_ARGUMENTS", bad.content)
        report = await verify_store(stores.audit)
        entries = await stores.audit.entries()
        expect(report.ok and len(entries) >= 3, f"audit: {report} with {len(entries)} entries")
    finally:
        await stores.close()


async def governed_call_postgres() -> None:
    import psycopg

    schema = f"wheel_smoke_{os.getpid()}"
    try:
        await governed_call(f"postgresql://127.0.0.1:5432/test?schema={schema}")
    finally:
        with psycopg.connect("postgresql://127.0.0.1:5432/test", autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def tool_search(*, dense: bool) -> None:
    from maitre import Toolbox
    from maitre.search import ToolIndex

    box = Toolbox("shop")

    @box.tool
    def weather_forecast(city: str) -> str:
        """Get the weather forecast for a city."""
        return "sunny"

    @box.tool
    def get_order(order_id: str) -> str:
        """Look up an order by its id for its status or delivery."""
        return "shipped"

    @box.tool(effect="write")
    def refund_payment(order_id: str) -> str:
        """Give a customer their money back for a purchase."""
        return "refunded"

    @box.tool(effect="write")
    def book_meeting(topic: str) -> str:
        """Schedule a meeting with colleagues in the calendar."""
        return "booked"

    index = ToolIndex(box)
    words = index.search("refund payment for order A1042")
    expect(words and words[0].name == "shop.refund_payment", f"by words: {[h.name for h in words]}")
    if not dense:
        expect(index.mode == "lexical", f"mode {index.mode} without the embeddings extra")
        return
    expect(index.mode == "hybrid", f"mode {index.mode} with the embeddings extra")
    query = "will it rain in Lisbon tomorrow?"  # no word of it is in any tool's text
    hits = index.search(query)
    expect(hits and hits[0].name == "shop.weather_forecast", f"by meaning: {[h.to_dict() for h in hits]}")
    expect(hits[0].dense_rank == 1 and hits[0].lexical_rank is None, f"not a dense hit: {hits[0].to_dict()}")
    expect(not ToolIndex(box, embedder=None).search(query), "words alone found it: the query is not a test")


def memory(*, dense: bool) -> None:
    from maitre.memory import MemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.sqlite(Path(tmp) / "memory.db")
        try:
            store.write("asha", "city", "Bengaluru")
            store.write("asha", "car", "a red Tesla Model 3")
            store.write("asha", "dentist", "Dr Rao on Church Street")
            hits = store.retrieve("asha", "which city is home?")
            expect(hits and hits[0].fact.key == "city", f"by words: {[(h.fact.key, h.score) for h in hits]}")
            if not dense:
                return
            from maitre.embeddings import MiniLMEmbedder

            expect(isinstance(store.embedder, MiniLMEmbedder), f"the embedder is {store.embedder!r}")
            hits = store.retrieve("asha", "what vehicle do I drive?")  # no word of it is stored
            expect(hits and hits[0].fact.key == "car", f"by meaning: {[h.fact.key for h in hits]}")
            expect(hits[0].similarity is not None and not hits[0].lexical, f"not a dense hit: {hits[0]}")
        finally:
            store.close()


def notice(*, expected: bool) -> None:
    done = run_python(
        """
        import tempfile
        from maitre import Toolbox
        from maitre.memory import MemoryStore
        from maitre.search import ToolIndex

        box = Toolbox("t")

        @box.tool
        def ping() -> str:
            "Answer pong."
            return "pong"

        ToolIndex(box).search("ping")
        ToolIndex(box).search("pong")
        with tempfile.TemporaryDirectory() as tmp:
            store = MemoryStore.sqlite(tmp + "/m.db")
            store.write("u", "city", "Paris")
            store.retrieve("u", "Paris")
            store.close()
        """
    )
    expect(done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-1500:]}")
    expect(not done.stdout, f"the library wrote to stdout: {done.stdout!r}")
    lines = [line for line in done.stderr.splitlines() if NOTICE in line]
    if expected:
        expect(len(lines) == 1, f"expected one notice line, got {len(lines)}:\n{done.stderr}")
        expect("not installed:" in lines[0], f"the notice does not say what is missing: {lines[0]!r}")
    else:
        expect(not lines, f"told to install an extra that is installed: {lines}")


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SETS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(SETS)}")
    sys.exit(main(sys.argv[1]))
