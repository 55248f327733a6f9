"""One configuration file read by every command (issue 12, item 2): found from the working
directory upward (maitre.toml or [tool.maitre]), named by --config or MAITRE_CONFIG, unknown keys
refused with the key and the file, flags over the file, `maitre config show` with secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.cli import app
from maitre.config import ConfigError, Settings, load_settings
from maitre.mcp.serve import plan_serve
from maitre.policy import Action
from maitre.stores import open_stores
from maitre.types import Effect, Risk

runner = CliRunner()


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MAITRE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def seed(db: Path) -> str:
    box = Toolbox()

    @box.tool(effect="write", risk="high")
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    async def main() -> str:
        async with await open_stores(str(db)) as stores:
            result = await Gate(box, stores=stores).call(
                ToolCall(id="c", name="refund", arguments={"order_id": "A1"}),
                Principal(user="alice", tenant="t"),
            )
            assert result.error is not None
            return str(result.error.details["approval_id"])

    return anyio.run(main)


def test_the_file_is_found_from_a_subfolder_and_its_relative_paths_are_its_own(tmp_path: Path, monkeypatch):
    (tmp_path / "state").mkdir()
    approval = seed(tmp_path / "state" / "maitre.db")
    (tmp_path / "maitre.toml").write_text('stores = "state/maitre.db"\n')
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    listed = runner.invoke(app, ["approvals", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [r["id"] for r in json.loads(listed.stdout)] == [approval]
    # a flag wins over the file
    other = runner.invoke(app, ["approvals", "list", "--stores", str(tmp_path / "nothing.db")])
    assert other.exit_code == 2 and "no maitre database" in other.stderr


def test_pyproject_tool_maitre_is_read_and_a_pyproject_without_it_is_passed_over(tmp_path: Path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.maitre.approvals]\nttl_s = 60\n[tool.maitre]\nstores = "m.db"\n'
    )
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.chdir(inner)
    settings = load_settings()
    assert settings.path == (tmp_path / "pyproject.toml").resolve()
    assert settings.config.approvals.ttl_s == 60
    assert settings.store_url(settings.config.stores.url or "") == str(tmp_path.resolve() / "m.db")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[stores]\nulr = "x.db"\n', "unknown key 'stores.ulr'"),
        ("[serve]\nport = 99999\n", "serve.port"),
        (
            '[auth]\nissuer = "https://id"\naudience = "me"\njwks_url = "https://id/j"\nalgorithms = ["RS999"]\n',
            "RS999",
        ),
        ('[auth]\nissuer = "https://id"\n', "audience"),
        ('[policy.matrix]\n"write.huge" = "allow"\n', "write.huge"),
        ('[policy]\ntaint = "sometimes"\n', "taint"),
        ('stores = "redis://127.0.0.1"\n', "rate limits"),
        ("[budgets]\nper_class = { sideways = 1 }\n", "sideways"),
        ("[mcp.upstreams.gh]\nheaders = {}\n", "url or command"),
        ("this is = = not toml", "not valid TOML"),
        ("frobnicate = 1\n", "unknown key 'frobnicate'"),
    ],
)
def test_a_mistake_in_the_file_is_one_line_naming_the_key_and_the_file(tmp_path: Path, text: str, says: str):
    path = tmp_path / "maitre.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert says in str(caught.value) and str(path) in str(caught.value)
    shown = runner.invoke(app, ["config", "show"])
    assert shown.exit_code == 2 and "Traceback" not in shown.output
    assert says in " ".join(shown.stderr.split())
    # a command that needs a setting refuses the file too, naming it
    listed = runner.invoke(app, ["approvals", "list"])
    assert listed.exit_code == 2 and "maitre.toml" in listed.stderr
    # --help never reads the file
    assert runner.invoke(app, ["approvals", "list", "--help"]).exit_code == 0


def test_config_show_masks_secrets_and_says_where_each_value_came_from(tmp_path: Path):
    (tmp_path / "maitre.toml").write_text(
        """
stores = "postgresql://maitre:hunter2@db.internal/prod?schema=gate&sslpassword=pw1"

[mcp.upstreams.gh]
url = "https://api.example.com/mcp"
headers = { Authorization = "Bearer $GITHUB_TOKEN", X-Api-Key = "sk-live-123" }

[serve]
port = 9000
"""
    )
    shown = runner.invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.stdout)
    values, sources = document["values"], document["sources"]
    assert document["file"] == str((tmp_path / "maitre.toml").resolve())
    assert "hunter2" not in shown.stdout and "pw1" not in shown.stdout and "sk-live-123" not in shown.stdout
    assert values["stores.url"].startswith("postgresql://maitre:***@db.internal/prod")
    assert values["mcp.upstreams.gh.headers.Authorization"] == "Bearer $GITHUB_TOKEN"  # a name, not a secret
    assert values["mcp.upstreams.gh.headers.X-Api-Key"] == "***"
    assert values["serve.port"] == 9000 and sources["serve.port"] == document["file"]
    assert values["serve.host"] == "127.0.0.1" and sources["serve.host"] == "default"
    table = runner.invoke(app, ["config", "show", "--wide"])
    assert table.exit_code == 0 and "hunter2" not in table.stdout and "serve.port" in table.stdout


def test_config_flag_and_environment_name_the_file(tmp_path: Path, monkeypatch):
    elsewhere = tmp_path / "conf" / "prod.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text("[serve]\nport = 7001\n")
    shown = runner.invoke(app, ["--config", str(elsewhere), "config", "show", "--json"])
    assert json.loads(shown.stdout)["values"]["serve.port"] == 7001
    monkeypatch.setenv("MAITRE_CONFIG", str(elsewhere))
    again = runner.invoke(app, ["config", "show", "--json"])
    assert json.loads(again.stdout)["values"]["serve.port"] == 7001
    monkeypatch.setenv("MAITRE_CONFIG", str(tmp_path / "gone.toml"))
    missing = runner.invoke(app, ["config", "show"])
    assert missing.exit_code == 2 and "gone.toml" in missing.stderr


def test_serve_merges_flags_over_the_file_over_the_defaults(tmp_path: Path):
    (tmp_path / "issuer.pem").write_text("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n")
    (tmp_path / "maitre.toml").write_text(
        """
stores = "state/maitre.db"
[serve]
target = "app.py:box"
transport = "http"
port = 9100
scopes = ["orders:read"]
[auth]
issuer = "https://id.example.com/"
audience = "https://tools.example.com/mcp"
key_file = "issuer.pem"
algorithms = ["RS256"]
[tracing]
otlp = "http://127.0.0.1:4318"
"""
    )
    settings = load_settings()
    plan = plan_serve(settings, port=9200, host=None, target=None)
    base = tmp_path.resolve()
    assert plan.target == f"{base / 'app.py'}:box" and plan.transport == "http"
    assert plan.port == 9200 and plan.host == "127.0.0.1"  # the flag, then the default
    assert plan.stores == str(base / "state" / "maitre.db") and plan.tasks == plan.stores
    assert plan.key_file == base / "issuer.pem" and plan.algorithms == ["RS256"]
    assert plan.principal.scopes == frozenset({"orders:read"}) and plan.otlp == "http://127.0.0.1:4318"
    over_stdio = plan_serve(settings, transport="stdio")
    assert over_stdio.issuer is None  # the file's auth applies to HTTP only
    with pytest.raises(Exception, match="JWT checks need --transport http"):
        plan_serve(settings, transport="stdio", jwt_issuer="https://other/")


def test_the_policy_and_budgets_sections_build_what_the_gate_runs_with():
    settings = Settings()
    assert settings.config.policy.build().matrix[(Effect.WRITE, Risk.MEDIUM)] is Action.ALLOW
    from maitre.config import MaitreConfig

    config = MaitreConfig.model_validate(
        {
            "policy": {"matrix": {"write.medium": "needs_approval"}, "approver_role": "approver"},
            "budgets": {"max_calls_per_run": 5, "rate_limit": {"per_second": 2, "burst": 3}},
        }
    )
    policy = config.policy.build()
    assert (
        policy.matrix[(Effect.WRITE, Risk.MEDIUM)] is Action.APPROVAL and policy.approver_role == "approver"
    )
    assert policy.taint == "data-flow"  # the default; the file can ask for the whole-run rule
    assert MaitreConfig.model_validate({"policy": {"taint": "run"}}).policy.build().taint == "run"
    budgets = config.budgets.build()
    assert budgets.max_calls_per_run == 5 and budgets.rate_limit is not None and budgets.rate_limit.burst == 3


def test_an_upstream_of_the_file_is_what_mcp_scan_and_pin_talk_to(tmp_path: Path):
    from maitre.mcp.testing import serve_process

    shop = Path(__file__).resolve().parents[1] / "mcp" / "mcp_testkit.py"
    with serve_process(f"{shop}:shop_box") as url:
        (tmp_path / "maitre.toml").write_text(
            f'[mcp]\nlockfile = "locks/mcp.lock.json"\n[mcp.upstreams.shop]\nurl = "{url}"\nallow_loopback = true\n'
        )
        scanned = runner.invoke(app, ["mcp", "scan", "--namespace", "shop", "--json"])
        assert scanned.exit_code in (0, 1) and "Traceback" not in scanned.output, scanned.output
        assert isinstance(json.loads(scanned.stdout), list)
        pinned = runner.invoke(app, ["mcp", "pin", "--namespace", "shop", "--force"])
        assert pinned.exit_code == 0, pinned.output
    lock = json.loads((tmp_path / "locks" / "mcp.lock.json").read_text())
    assert sorted(lock["servers"]["shop"]["tools"]) == ["add_note", "delete_order", "get_order"]
