"""The upstream byte cap holds against a server that lies about its body's length.

`maitre.mcp.egress` skips counting a JSON body whose Content-Length is within the cap, because the
HTTP/1.1 parser reads no more than that. These attacks check that premise on the real client stack
(httpx2 with the egress hooks): a body longer than it says is cut at what it said, a chunked body
that also claims a small Content-Length is still counted, an honest oversized one is refused, and
a compressed one (a gzip bomb: a few bytes counted, far more decoded) is refused unread.
The address guard's kept verdict on an address literal still refuses every time.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator

import httpx2
import pytest

from maitre.mcp.egress import IDENTITY, AddressGuard, AddressRefused, ResponseTooLarge, _hooks

pytestmark = pytest.mark.anyio

CAP = 1024
BIG = 200_000


async def _answer(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
    writer.write(head + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def lying_server(kind: str) -> AsyncIterator[str]:
    """127.0.0.1 HTTP server answering every request with one kind of dishonest JSON response."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if kind == "gzip bomb":  # 230 bytes on the wire, 200 kB once decompressed
            bomb = gzip.compress(b'"' + b"x" * BIG + b'"')
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: %d\r\n\r\n" % len(bomb)
            )
            await _answer(writer, head, bomb)
        elif kind == "echo accept-encoding":
            asked = [line for line in request.split(b"\r\n") if line.lower().startswith(b"accept-encoding:")]
            body = b'"' + (asked[0].split(b":", 1)[1].strip() if asked else b"") + b'"'
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(
                body
            )
            await _answer(writer, head, body)
        elif kind == "longer than declared":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n"
            await _answer(writer, head, b'"' + b"x" * BIG + b'"')
        elif kind == "chunked with a small length":
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            await _answer(writer, head, b"%x\r\n%s\r\n0\r\n\r\n" % (BIG, b"x" * BIG))
        else:  # honest but too big
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % BIG
            await _answer(writer, head, b"x" * BIG)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.close()


async def _read(url: str) -> bytes:
    hooks = _hooks(AddressGuard.of(allow_loopback=True), CAP)
    async with (
        httpx2.AsyncClient(event_hooks=hooks, headers=IDENTITY) as http,
        http.stream("POST", url, json={}) as response,
    ):
        return await response.aread()


async def test_a_body_longer_than_its_content_length_is_cut_at_the_declared_length():
    async with lying_server("longer than declared") as url:
        body = await _read(url)
    assert len(body) == 20


async def test_a_chunked_body_claiming_a_small_length_is_still_counted():
    async with lying_server("chunked with a small length") as url:
        with pytest.raises((ResponseTooLarge, httpx2.RemoteProtocolError, httpx2.LocalProtocolError)):
            await _read(url)


async def test_an_honest_body_over_the_cap_is_refused_before_it_is_read():
    async with lying_server("too big") as url:
        with pytest.raises(ResponseTooLarge):
            await _read(url)


async def test_a_compressed_body_is_refused_unread_however_small_on_the_wire():
    """A gzip bomb counted as the 230 bytes that arrive would be 200 kB (or gigabytes) once decoded."""
    async with lying_server("gzip bomb") as url:
        with pytest.raises(ResponseTooLarge, match="gzip"):
            await _read(url)


async def test_the_transport_asks_upstreams_for_uncompressed_answers():
    from maitre.mcp import egress

    sent: list[str] = []

    @contextlib.asynccontextmanager
    async def recording(url: str, *, http_client: httpx2.AsyncClient, **_: object) -> AsyncIterator[None]:
        sent.append(http_client.headers.get("accept-encoding", ""))
        yield None

    async with lying_server("echo accept-encoding") as url:
        assert await _read(url) == b'"identity"'
        original = egress.streamable_http_client
        egress.streamable_http_client = recording  # type: ignore[assignment]
        try:
            async with egress.guarded_http_transport(
                url, {"Accept-Encoding": "gzip"}, guard=AddressGuard.of(allow_loopback=True)
            ):
                pass
        finally:
            egress.streamable_http_client = original
    assert sent == ["identity"]  # a configured header cannot turn compression back on


async def test_the_kept_verdict_on_an_address_literal_refuses_every_time():
    guard = AddressGuard()
    for _ in range(3):
        with pytest.raises(AddressRefused, match="loopback"):
            await guard.check_host("127.0.0.1", 80)
    await AddressGuard.of(allow_loopback=True).check_host("127.0.0.1", 80)
    with pytest.raises(AddressRefused, match="metadata"):
        await AddressGuard.of(allowed_hosts=["169.254.0.0/16"]).check_host("169.254.169.254", 80)
