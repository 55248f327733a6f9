"""The README cannot rot: its code runs, its commands exist, its tables and links are true.

A newcomer copies what the README shows, so every example is executed here, offline, in document
order, in one scratch folder (files an earlier block writes, such as `shop.py` and `shop.db`, are
there for the later ones). The convention, written as an HTML comment on the line just before a
fenced block:

- a ```python block runs, in a fresh namespace, as the README shows it; top-level `await` runs on
  anyio. `<!-- test: skip (why) -->` leaves a fragment out (it is still compiled);
- `<!-- test: file NAME.py -->`: the block is saved as NAME.py and run as a script (`__main__`),
  so later blocks can `from NAME import ...` and commands can name `NAME.py:attr`;
- `<!-- test: output -->` on a ```text block: what the block before printed, compared with its
  whitespace normalised and its generated ids (`run_...`, `apr_...`) as wildcards;
- a ```toml block is a `maitre.toml`: it is saved in the folder and read with `maitre.config`.

The five-minute story is also replayed on the command line (approve, resume, verify), every
`maitre ...` line of README.md and CONTRIBUTING.md must name a real command with real options,
the extras table must match pyproject.toml, and links must stay inside the repository.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import re
import runpy
import shlex
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from packaging.requirements import Requirement
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
MARKER = re.compile(r"^<!--\s*test:\s*(?P<kind>\w+)\s*(?P<arg>.*?)\s*-->$")
IDS = [(re.compile(r"\brun_[0-9a-f]{8,}\b"), "run_ID"), (re.compile(r"\bapr_[A-Za-z0-9_-]{8,}"), "apr_ID")]


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file."""

    lang: str
    text: str
    line: int
    """The line of the opening fence (1-based)."""
    kind: str = ""
    """The marker's kind (`skip`, `file`, `output`), or "" without a marker."""
    arg: str = ""


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = lines[i]
        if not fence.startswith("```"):
            i += 1
            continue
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(previous)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        found.append(
            Block(
                lang=fence[3:].strip(),
                text="\n".join(lines[i + 1 : end]),
                line=i + 1,
                kind=marker["kind"] if marker else "",
                arg=marker["arg"] if marker else "",
            )
        )
        i = end + 1
    return found


def normalised(text: str) -> str:
    for pattern, placeholder in IDS:
        text = pattern.sub(placeholder, text)
    return " ".join(text.split())


async def _await(awaitable: Any) -> Any:
    return await awaitable


def run_python(block: Block, namespace: dict[str, Any]) -> str:
    """Execute the block as the README shows it; return what it printed. Line numbers in a
    traceback are the README's."""
    source = "\n" * block.line + block.text
    code = compile(source, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            anyio.run(_await, result)
    return out.getvalue()


def run_file(block: Block, folder: Path) -> str:
    path = folder / block.arg
    path.write_text(block.text + "\n", encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(path), run_name="__main__")
    return out.getvalue()


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An empty folder to run in, importable, with no configuration file from the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("MAITRE_CONFIG", raising=False)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:  # the README's own modules (shop), never maitre's
        if getattr(sys.modules[name], "__file__", "") and str(tmp_path) in str(sys.modules[name].__file__):
            del sys.modules[name]


def test_every_python_and_toml_block_of_the_readme_runs(scratch: Path) -> None:
    from maitre.config import load_settings

    ran: list[Block] = []
    printed: tuple[Block, str] | None = None
    for block in blocks(README):
        where = f"README.md line {block.line}"
        if block.lang == "python":
            if block.kind == "skip":
                assert block.arg, f"{where}: say why the block is not run: <!-- test: skip (why) -->"
                compile(block.text, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                continue
            try:
                if block.kind == "file":
                    output = run_file(block, scratch)
                else:
                    assert not block.kind, f"{where}: unknown marker {block.kind!r}"
                    output = run_python(block, {"__name__": "__readme__"})
            except Exception as exc:
                raise AssertionError(f"{where}: the example fails: {type(exc).__name__}: {exc}") from exc
            ran.append(block)
            printed = (block, output)
        elif block.lang == "toml":
            path = scratch / "maitre.toml"
            path.write_text(block.text + "\n", encoding="utf-8")
            settings = load_settings(path)  # unknown keys and bad values raise ConfigError
            assert settings.given, f"{where}: the configuration example sets nothing"
            settings.config.policy.build()
            settings.config.budgets.build()
            ran.append(block)
        elif block.kind == "output":
            assert printed is not None, f"{where}: an output block with no example before it"
            source, output = printed
            assert normalised(output) == normalised(block.text), (
                f"{where}: the block at line {source.line} printed\n{output}"
            )
            printed = None

    texts = [b.text for b in ran]
    # The five-minute app (an agent), the gate, the sync helpers and the configuration file must
    # stay among the examples that run, whatever else is marked skip.
    for needed in ("run_sync(", "await gate.call(", "call_sync(", "ttl_s"):
        assert any(needed in text for text in texts), f"no README example that runs uses {needed}"
    assert any(b.lang == "toml" for b in ran), "the configuration example is not checked"


def _shop(folder: Path) -> tuple[str, str]:
    """Save and run shop.py; the run id and the approval id it printed."""
    shop = next(b for b in blocks(README) if b.kind == "file" and b.arg == "shop.py")
    output = run_file(shop, folder)
    run_id = re.search(r"\brun_[0-9a-f]+", output)
    approval_id = re.search(r"\bapr_[A-Za-z0-9_-]+", output)
    assert run_id and approval_id, output
    return run_id[0], approval_id[0]


def _cli_lines(block: Block) -> list[list[str]]:
    """The command lines of a shell block, continuation lines joined, comments dropped."""
    joined = block.text.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):  # VAR=value before a command
            words.pop(0)
        if words:
            commands.append(words)
    return commands


def test_the_five_minute_story_finishes_on_the_command_line(scratch: Path) -> None:
    """The commands the README gives a person (approve, resume, verify) work on what shop.py left."""
    from maitre.cli import app

    run_id, approval_id = _shop(scratch)
    story = next(b for b in blocks(README) if b.lang == "bash" and "runs resume" in b.text)
    example_run = re.search(r"\brun_[0-9a-f]+", story.text)
    example_approval = re.search(r"\bapr_[A-Za-z0-9_-]+", story.text)
    assert example_run and example_approval
    outputs = {}
    for words in _cli_lines(story):
        assert words[0] == "maitre", words
        args = [
            w.replace(example_run[0], run_id).replace(example_approval[0], approval_id) for w in words[1:]
        ]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        outputs[" ".join(args[:2])] = result.output
    assert approval_id in outputs["approvals list"]
    assert "approved" in outputs["approvals approve"] and "via=cli" in outputs["approvals approve"]
    assert f"{run_id}: finished" in outputs["runs resume"]
    assert "audit chain intact" in outputs["audit verify"]


def _command_tree() -> Any:
    """The `maitre` command as click sees it (typer's vendored click: groups have `commands`)."""
    from maitre.cli import app

    root = typer.main.get_command(app)
    assert "serve" in getattr(root, "commands", {})
    return root


def _check_maitre_command(words: list[str], root: Any, where: str) -> None:
    command = root
    rest = words[1:]
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        sub = command.commands.get(rest[0])
        default = getattr(command, "default_command", None)  # `maitre eval CASES` = `maitre eval run CASES`
        if sub is None and default in command.commands:
            command = command.commands[default]
            break
        assert sub is not None, f"{where}: `maitre {' '.join(words[1:])}`: no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    options |= {opt for param in root.params for opt in param.opts} | {"--help"}
    for word in rest:
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            assert flag in options, f"{where}: `{' '.join(words)}`: {command.name} has no option {flag}"


def _repo_paths(words: list[str]) -> list[str]:
    paths = []
    for word in words:
        path = word.split(":", 1)[0]
        if re.match(r"^(tests|scripts|examples|benchmarks|src)/", path):
            paths.append(path)
    return paths


@pytest.mark.parametrize("doc", [README, CONTRIBUTING], ids=lambda p: p.name)
def test_every_command_the_docs_show_exists(doc: Path) -> None:
    """`maitre ...` names real commands and options; make targets, scripts, test paths and pip
    extras exist."""
    root = _command_tree()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.MULTILINE))
    checked = 0
    for block in blocks(doc):
        if block.lang not in ("bash", "sh", "shell"):
            continue
        for words in _cli_lines(block):
            where = f"{doc.name} line {block.line}"
            program = words[0].rsplit("/", 1)[-1]
            if program == "maitre":
                _check_maitre_command(words, root, where)
                checked += 1
            elif program == "make":
                for target in words[1:]:
                    assert target in targets, f"{where}: no make target {target!r}"
            elif program == "pip" or words[1:3] == ["-m", "pip"]:
                for spec in words:
                    if spec.startswith("maitre["):
                        asked = set(Requirement(spec).extras)
                        assert asked <= extras, f"{where}: unknown extras {asked - extras}"
            for path in _repo_paths(words):
                assert (ROOT / path).exists(), f"{where}: {path} does not exist"
    if doc == README:
        assert checked >= 10, "the README's command lines were not found"


def _extras_table(text: str) -> dict[str, tuple[str, str]]:
    """{extra: (what it enables, packages)} from the README's table; the core row is ''."""
    rows: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.startswith("|"):
            continue
        name = cells[0]
        if name == "*(none)*":
            rows[""] = (cells[1], cells[2])
        elif re.fullmatch(r"`[a-z]+`", name):
            rows[name.strip("`")] = (cells[1], cells[2])
    return rows


def _names(requirements: list[str]) -> set[str]:
    names = set()
    for spec in requirements:
        requirement = Requirement(spec)
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        names.add(requirement.name.lower() + extras)
    return names


def test_the_extras_table_is_what_pyproject_installs() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {
        name: deps
        for name, deps in pyproject["project"]["optional-dependencies"].items()
        if name not in ("dev", "bench", "agentdojo", "fast", "local")
    }
    text = README.read_text(encoding="utf-8")
    # The benchmark's and the speed extras are not integrations (not in `all`), but a user still reads its name.
    for outside_all in ("agentdojo", "fast", "local"):
        assert f"maitre[{outside_all}]" in text, f"the README does not say what maitre[{outside_all}] is"
    table = _extras_table(text)
    assert set(table) == set(declared) | {""}, "the README's extras differ from pyproject.toml's"
    listed = {name: {p.strip().lower() for p in packages.split(",")} for name, (_, packages) in table.items()}
    assert listed[""] == _names(pyproject["project"]["dependencies"])
    for name, deps in declared.items():
        if name == "all":
            (everything,) = deps
            assert set(Requirement(everything).extras) == set(declared) - {"all"}
            continue
        assert listed[name] == _names(deps), name


def test_the_smoke_sets_the_readme_names_are_the_ones_ci_runs() -> None:
    script = (ROOT / "scripts" / "wheel_smoke.sh").read_text(encoding="utf-8")
    default = re.search(r"WHEEL_SMOKE_SETS:-([a-z ]+)\}", script)
    assert default, "scripts/wheel_smoke.sh no longer names its default sets"
    paragraph = next(p for p in README.read_text(encoding="utf-8").split("\n\n") if "wheel_smoke.sh" in p)
    for name in default[1].split():
        assert f"`{name}`" in paragraph, name


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", [README, CONTRIBUTING], ids=lambda p: p.name)
def test_links_stay_inside_the_repository_and_anchors_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "../" not in text, f"{doc.name} points outside the repository"
    anchors = {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for target in links:
        if target.startswith(("http://", "https://")):
            continue
        if target.startswith("#"):
            assert target[1:] in anchors, f"{doc.name}: no heading for the link {target}"
            continue
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: broken link {target}"


def test_the_word_seed_is_explained_where_it_is_used() -> None:
    """Outside example paths (`seed003_refunds`), "seed" appears only in the sentence that says what
    one is. A model's sampling seed (the `[model] seed` key, `seed = 7`, `&seed=7`) is another word."""
    text = README.read_text(encoding="utf-8")
    text = re.sub(r"`seed`|^seed = .*$|&seed=\d+", "", text, flags=re.M)
    paragraphs = [p for p in text.split("\n\n") if re.search(r"\bseeds?\b", re.sub(r"seed\d{3}\w*", "", p))]
    assert len(paragraphs) <= 1, paragraphs
    assert all('a "seed" is' in p for p in paragraphs), paragraphs


def test_the_configuration_section_names_every_key_and_only_real_ones() -> None:
    """Each key of `maitre.toml` appears in the section, and each key the section names exists."""
    from maitre.config import MaitreConfig, UpstreamConfig
    from maitre.config.schema import ToolOverrideConfig

    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The configuration file") : text.index("## Serving tools over MCP")]
    sections = {name: field.annotation for name, field in MaitreConfig.model_fields.items()}
    keys = {
        key
        for model in [*sections.values(), UpstreamConfig, ToolOverrideConfig]
        for key in getattr(model, "model_fields", {})
    }
    for key in keys:
        assert re.search(rf"\b{key}\b", section), f"the configuration section does not mention {key!r}"
    other = section[section.index("Other keys:") :].split("\n\n", 1)[0]
    for named in re.findall(r"`([a-z_]+)`", other):
        assert named in keys, f"the configuration section names {named!r}, which maitre.toml does not take"
    for header in re.findall(r"`\[([a-z_.]+)\]", other):
        assert header.split(".")[0] in sections, header
