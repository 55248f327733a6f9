"""2025-11-25 sessions across gateway replicas: what breaks, and the two answers that work.

A 2025-11-25 client opens a session (`initialize` answers `Mcp-Session-Id`) held in the memory of
the replica that answered; 2026-07-28 requests need nothing of the kind (the other test runs them
round robin). Two replicas of each kind behind HAProxy, the official SDK client in legacy mode:

- plain round robin over stateful replicas: the session's next request lands on the other replica,
  which does not know it, and the client fails (this is why an answer is needed);
- `legacy_sessions="sticky"` (HAProxy stick table on Mcp-Session-Id): every request of a session
  reaches the replica that opened it, and the client works; when that replica dies the session is
  gone (a new client session works at once on the survivor);
- `[serve] stateless_legacy = true`: no session id at all, round robin works, each request alone.
"""

from __future__ import annotations

import signal
import sys
import uuid
from collections import Counter
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rig

from maitre.mcp.testing import bearer_client


def _missing() -> str | None:
    if rig.haproxy_binary() is None:
        return "haproxy is not installed (apt-get install -y haproxy; .ci/run installs it)"
    return rig.postgres_error()


pytestmark = [pytest.mark.skipif(_missing() is not None, reason=_missing() or ""), pytest.mark.postgres]


async def legacy_session(url: str, token: str, calls: int = 4) -> list[str]:
    """One 2025-11-25 SDK session: list the tools, then `calls` reads; the texts it got back."""
    texts: list[str] = []
    async with bearer_client(url, token, mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "ledger.lookup" in names, names
        for _ in range(calls):
            result = await client.call_tool("ledger.lookup", {"write_id": "none"})
            assert not result.is_error, result
            texts.append(str(result.structured_content))
    return texts


def _innermost(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc)


def _servers(front: rig.Haproxy) -> Counter[str]:
    return Counter(
        word.split("/", 1)[1]
        for line in front.log_lines()
        for word in line.split()
        if word.startswith("gateways/")
    )


def test_2025_11_25_sessions_need_stickiness_or_stateless_legacy(tmp_path: Path) -> None:
    upstream_port, *free = rig.ports(11)
    token = rig.bearer_token("legacy", f"scale-{uuid.uuid4().hex[:8]}")
    lockfile = tmp_path / "maitre.mcp.lock.json"
    stateful, stateless = tmp_path / "stateful", tmp_path / "stateless"
    stateful.mkdir()
    stateless.mkdir()

    with (
        rig.pg_schema() as schema,
        rig.ledger_upstream(
            upstream_port, tmp_path / "ledger.txt", tmp_path / "upstream.log"
        ) as upstream_url,
    ):
        anyio.run(rig.pin_upstream, lockfile, "ledger", upstream_url)
        for folder in (stateful, stateless):
            (folder / lockfile.name).write_text(lockfile.read_text())

        def config(folder: Path, *, stateless_legacy: bool) -> Path:
            return rig.write_gateway_config(
                folder,
                stores=rig.stores_url(schema),
                upstream_url=upstream_url,
                lockfile=folder / lockfile.name,
                rate_limits=None,
                stateless_legacy=stateless_legacy,
            )

        configs = {
            "a1": config(stateful, stateless_legacy=False),
            "b1": config(stateless, stateless_legacy=True),
        }
        configs["a2"], configs["b2"] = configs["a1"], configs["b1"]
        ports = dict(zip(["a1", "a2", "b1", "b2"], free[:4], strict=True))
        fronts = [tmp_path / f"haproxy-{name}" for name in ("plain", "sticky", "stateless")]
        for folder in fronts:
            folder.mkdir()
        a_ports = {"a1": ports["a1"], "a2": ports["a2"]}
        b_ports = {"b1": ports["b1"], "b2": ports["b2"]}
        with (
            rig.replicas(configs, ports, tmp_path) as running,
            rig.haproxy(
                fronts[0],
                port=free[4],
                stats_port=free[5],
                servers=a_ports,
                legacy_sessions="none",
            ) as plain,
            rig.haproxy(fronts[1], port=free[6], stats_port=free[7], servers=a_ports) as sticky,
            rig.haproxy(
                fronts[2],
                port=free[8],
                stats_port=free[9],
                servers=b_ports,
                legacy_sessions="none",
            ) as flat,
        ):
            # Round robin over stateful replicas: the session is unknown to the second replica.
            with pytest.raises(ExceptionGroup) as caught:  # the SDK client raises its MCPError in groups
                anyio.run(legacy_session, plain.url, token)
            assert "Session not found" in _innermost(caught.value), repr(caught.value)

            # Sticky by Mcp-Session-Id: one replica serves the whole session.
            before = _servers(sticky)
            assert len(anyio.run(legacy_session, sticky.url, token)) == 4
            session_servers = _servers(sticky) - before
            assert len(session_servers) == 1, session_servers  # the health checks are not logged

            # stateless_legacy: no session, round robin, both replicas serve the one client.
            assert len(anyio.run(legacy_session, flat.url, token, 6)) == 6
            assert set(_servers(flat)) == {"b1", "b2"}, _servers(flat)

            # The sticky replica dies: its sessions die with it, a new session works on the other.
            (holder,) = session_servers
            running[holder].proc.send_signal(signal.SIGKILL)
            running[holder].proc.wait(5)
            sticky.wait({holder: "DOWN"})
            assert len(anyio.run(legacy_session, sticky.url, token)) == 4
