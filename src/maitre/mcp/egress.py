"""What leaves for an imported MCP server, and what may come back: an address guard and a byte cap.

**Address guard (SSRF).** `McpUpstream` (hence `Toolbox.from_mcp` and `maitre mcp pin|check|scan`)
connects only to public addresses. Before any socket opens, `check_url` resolves the host name
(`getaddrinfo`, in a worker thread) and refuses the URL when *any* resolved address is loopback,
private (10/8, 172.16/12, 192.168/16, fc00::/7 ...), link-local (169.254/16, fe80::/10), shared,
reserved, multicast, unspecified, or a cloud metadata address. Odd numeric spellings (`127.1`,
`0x7f000001`, `2130706433`, `0177.0.0.1`) are read the way the C resolver reads them
(`socket.inet_aton`), and addresses embedded in IPv6 (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible,
NAT64 `64:ff9b::/96`, 6to4, Teredo) are checked too. An HTTP request hook repeats the check before
every request of the session, so a name that is re-pointed later (DNS rebinding) is refused on
the next request. The remaining window is the one between that check and the transport's own
resolution of the same name; closing it needs connecting to the checked address, which httpx2
offers no public hook for.

Exceptions are explicit: `allow_loopback=True` (a local development server, tests) and
`allowed_hosts=[...]`, whose entries are host names (matched exactly, case-insensitively), IP
addresses or networks (`"10.20.0.0/16"`). A metadata address is refused even inside an allowed
network unless that very address is listed. A stdio command is a local process, not a network
target: it is not checked.

**Byte cap.** `DEFAULT_MAX_RESPONSE_BYTES` (4 MiB) bounds what one upstream response may be. A JSON
response is cut off while it is read (Content-Length first, then bytes as they arrive), so an
oversized body is never buffered or parsed (a body whose Content-Length is within the cap is
not counted again: the HTTP/1.1 parser reads no more than that). Every request asks for
`Accept-Encoding: identity`, and a response compressed anyway is refused unread: decompression
would turn a few counted bytes into gigabytes. One SSE event is bounded by the SDK's own
`max_sse_event_size`, which the client sets to the same cap.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ..exceptions import UserError

__all__ = [
    "AddressGuard",
    "AddressRefused",
    "CapHook",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "GuardHook",
    "IDENTITY",
    "IP",
    "METADATA_ADDRESSES",
    "OVERSIZE_MARKER",
    "ResponseTooLarge",
    "guarded_http_transport",
    "parse_ip",
]

DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""4 MiB: the most one upstream response (a JSON body, one SSE event, a result's content) may be."""

OVERSIZE_MARKER = "maitre: upstream response exceeded"
"""Start of the message of `ResponseTooLarge`; the SDK turns it into a JSON-RPC error text."""

IP = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES: frozenset[IP] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean ...
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "168.63.129.16",  # Azure wire server (a public-looking address)
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
    )
)
"""Cloud instance-metadata endpoints: refused unless listed one by one in `allowed_hosts`."""

_NUMERIC = re.compile(r"^[0-9a-fA-FxX.]+$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPAT = ipaddress.ip_network("::/96")


class AddressRefused(UserError):
    """An MCP import was pointed at an address maitre does not connect to by default."""


class ResponseTooLarge(httpx2.StreamError):
    """An upstream response is bigger than the cap (a `StreamError`, so the SDK reports it as an error)."""


def parse_ip(host: str) -> IP | None:
    """`host` as an IP address, reading the C resolver's odd IPv4 forms; None for a host name."""
    text = host.strip().strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC.match(text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _embedded(ip: IP) -> list[IP]:
    """The IPv4 addresses an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found: list[IP] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


@dataclass(frozen=True)
class AddressGuard:
    """Which addresses an upstream connection may go to (see the module docstring)."""

    allow_loopback: bool = False
    allowed_hosts: tuple[str, ...] = ()

    @classmethod
    def of(cls, *, allow_loopback: bool = False, allowed_hosts: Iterable[str] = ()) -> AddressGuard:
        return cls(allow_loopback=allow_loopback, allowed_hosts=tuple(allowed_hosts))

    def _allowed(self) -> tuple[frozenset[str], tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]]:
        return _parse_allowed(self.allowed_hosts)

    def refusal(self, ip: IP, *, name_allowed: bool = False) -> str | None:
        """Why `ip` is refused, or None when a connection to it is allowed."""
        _, networks = self._allowed()
        for candidate in (ip, *_embedded(ip)):
            listed = [net for net in networks if candidate in net]
            if candidate in METADATA_ADDRESSES:
                if any(net.num_addresses == 1 for net in listed):
                    continue
                return "a cloud metadata address"
            if listed or name_allowed:
                continue
            if candidate.is_loopback:
                if self.allow_loopback:
                    continue
                return "a loopback address (pass allow_loopback=True for a local development server)"
            if candidate.is_link_local:
                return "a link-local address"
            if candidate.is_private or not candidate.is_global:
                return "a private or non-public address"
            if candidate.is_multicast or candidate.is_reserved or candidate.is_unspecified:
                return "a reserved, multicast or unspecified address"
        return None

    async def check_url(self, url: str) -> None:
        """Raise `AddressRefused` unless every address `url`'s host resolves to is allowed."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AddressRefused(f"MCP upstream URL {url!r} must be http:// or https:// with a host")
        await self.check_host(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))

    async def check_host(self, host: str, port: int) -> None:
        """Raise `AddressRefused` unless every address of `host` is allowed (resolves in a thread).

        An address literal needs no resolution and its verdict cannot change, so that verdict is
        kept (`_literal_verdict`: the request hook asks it before every upstream request); a host
        name is resolved and judged again every time (DNS rebinding)."""
        literal, why = _literal_verdict(self, host)
        if not literal:
            try:
                infos = await anyio.to_thread.run_sync(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
            except OSError as exc:
                raise AddressRefused(f"MCP upstream host {host!r} could not be resolved: {exc}") from None
            why = self._verdict(
                host, [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
            )
        if why is not None:
            raise AddressRefused(why)

    def _verdict(self, host: str, addresses: list[IP]) -> str | None:
        """Why a connection to `host`, which resolves to `addresses`, is refused (None: allowed)."""
        names, _ = self._allowed()
        name_allowed = host.lower().rstrip(".") in names
        if not addresses:
            return f"MCP upstream host {host!r} resolves to no address"
        for address in addresses:
            why = self.refusal(address, name_allowed=name_allowed)
            if why is not None:
                return (
                    f"maitre does not connect MCP imports to {host!r}: it resolves to {address}, {why}. "
                    "List the host in allowed_hosts=[...] (CLI: --allow-host) if it is meant."
                )
        return None


@functools.lru_cache(maxsize=256)
def _parse_allowed(
    entries: tuple[str, ...],
) -> tuple[frozenset[str], tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]]:
    """`allowed_hosts` read once: the host names, and the addresses and networks."""
    names: set[str] = set()
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip().strip("[]"), strict=False))
        except ValueError:
            names.add(entry.strip().lower().rstrip("."))
    return frozenset(names), tuple(networks)


@functools.lru_cache(maxsize=1024)
def _literal_verdict(guard: AddressGuard, host: str) -> tuple[bool, str | None]:
    """Whether `host` is an address literal and, if so, `guard`'s verdict on it: a pure function of
    the two, so it is kept. (False, None) for a host name, which must be resolved each time."""
    ip = parse_ip(host)
    if ip is None:
        return False, None
    return True, guard._verdict(host, [ip])


class _CappedStream(httpx2.AsyncByteStream):
    """Passes a response body through, raising `ResponseTooLarge` once it exceeds `limit` bytes."""

    def __init__(self, inner: Any, limit: int, *, declared: int = 0) -> None:
        self._inner = inner
        self._limit = limit
        self._declared = declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared > self._limit:
            raise ResponseTooLarge(f"{OVERSIZE_MARKER} {self._limit} bytes (Content-Length {self._declared})")
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge(f"{OVERSIZE_MARKER} {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Refused(httpx2.AsyncByteStream):
    """A response body that is not read: raises `ResponseTooLarge` at the first read."""

    def __init__(self, message: str) -> None:
        self._message = message

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise ResponseTooLarge(self._message)
        yield b""  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        return None


IDENTITY = {"Accept-Encoding": "identity"}
"""Sent with every upstream request: the byte cap counts bytes as they arrive, which bounds what is
parsed only when nothing decompresses them afterwards."""


class GuardHook:
    """The request hook: every request's host is checked by `guard` (resolved, not only the URL)."""

    def __init__(self, guard: AddressGuard) -> None:
        self.guard = guard

    async def __call__(self, request: httpx2.Request) -> None:
        await self.guard.check_host(request.url.host, request.url.port or 443)


class CapHook:
    """The response hook: a body over `max_bytes`, or encoded past counting, is refused as it is read."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    def needs_counting(self, headers: httpx2.Headers) -> bool | str:
        """What the cap asks of a response with these headers: a refusal message (a compressed body,
        never read), True (count its bytes as they arrive) or False (its length is known and
        within the cap, or it is SSE, whose events the SDK's `max_sse_event_size` bounds)."""
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            # Asked for identity (`IDENTITY`); a compressed body would be decoded past any count of
            # the bytes that arrived (230 gzip bytes are 200 kB of JSON), so it is not read at all.
            return f"{OVERSIZE_MARKER} what maitre can bound: a {encoding}-encoded response (identity was asked for)"
        if not headers.get("content-type", "").lower().startswith("application/json"):
            return False  # SSE events are bounded by the SDK's max_sse_event_size
        length = headers.get("content-length", "")
        # The HTTP/1.1 parser reads exactly Content-Length bytes of body (no more can arrive as
        # this response's), so a body declared within the cap needs no counting on the way.
        return not (length.isdigit() and int(length) <= self.max_bytes and "transfer-encoding" not in headers)

    async def __call__(self, response: httpx2.Response) -> None:
        # Raised while the SDK reads the body, where it becomes a JSON-RPC error for this request.
        verdict = self.needs_counting(response.headers)
        if isinstance(verdict, str):
            response.stream = _Refused(verdict)
        elif verdict:
            length = response.headers.get("content-length", "")
            declared = int(length) if length.isdigit() else 0
            response.stream = _CappedStream(response.stream, self.max_bytes, declared=declared)


def _hooks(guard: AddressGuard | None, max_bytes: int | None) -> dict[str, list[Any]]:
    """The HTTP client's event hooks: `GuardHook` on requests, `CapHook` on responses (either may be
    absent). `maitre.mcp.direct_call` recognises them by type to apply them itself."""
    hooks: dict[str, list[Any]] = {"request": [], "response": []}
    if guard is not None:
        hooks["request"].append(GuardHook(guard))
    if max_bytes is not None:
        hooks["response"].append(CapHook(max_bytes))
    return hooks


@asynccontextmanager
async def guarded_http_transport(
    url: str,
    headers: Mapping[str, str],
    *,
    guard: AddressGuard | None = None,
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[Any]:
    """A Streamable HTTP transport for `mcp.Client`: only these headers, the guard, the byte cap.

    `auth` (an OAuth client flow, `maitre.mcp.upstream_auth`) rides on the HTTP client, so the
    guard's request hook checks every request the flow sends too, token endpoints included."""
    if guard is not None:
        await guard.check_url(url)
    sent = {**dict(headers), **IDENTITY} if max_response_bytes is not None else dict(headers)
    async with create_mcp_http_client(headers=sent or None, auth=auth) as http:
        http.event_hooks = _hooks(guard, max_response_bytes)
        async with streamable_http_client(
            url, http_client=http, max_sse_event_size=max_response_bytes
        ) as streams:
            yield streams
