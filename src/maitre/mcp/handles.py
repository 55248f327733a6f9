"""Signed, tenant-bound handles: state a stateless server can hand to a model (seed 004).

With the 2026-07-28 revision "the handle is the state": `start_export` returns a handle, the
model passes it to `check_export`, and the two calls may reach two different processes. A bare
job id would let a model (or an injected instruction) guess or swap ids, and a handle leaked from
one tenant would open another tenant's job. So a handle is an HMAC-signed token naming its kind,
the reference behind it and the tenant (optionally the user) it was minted for; opening it checks
all three. A forged handle and another tenant's handle fail the same way - NOT_FOUND, with no
hint which - so the error cannot be used as an oracle.

```python
handles = Handles(secret)                                  # the secret all server processes share
h = handles.mint("export", job_id, principal)              # in start_export
job_id = handles.open(h, principal, kind="export")         # in check_export; raises ToolError
```
"""

from __future__ import annotations

from ..types import Principal, ToolError
from .signing import InvalidToken, Signer

__all__ = ["Handles"]


class Handles:
    """Mint and open handles bound to a tenant (and, with `bind_user=True`, to the user)."""

    def __init__(
        self, secret: bytes, *, bind_user: bool = False, ttl_s: float | None = 7 * 24 * 3600
    ) -> None:
        self._signer = Signer(secret, purpose="handle")
        self.bind_user = bind_user
        self.ttl_s = ttl_s

    def mint(self, kind: str, ref: str, principal: Principal) -> str:
        """A handle for `ref` (a job id, a cursor, ...) that only `principal`'s tenant can open."""
        claims = {"k": kind, "r": ref, "t": principal.tenant}
        if self.bind_user:
            claims["u"] = principal.user
        return f"{kind}_{self._signer.sign(claims, ttl_s=self.ttl_s)}"

    def open(self, handle: str, principal: Principal, *, kind: str) -> str:
        """The reference behind `handle`, if it was minted by us, for this kind and this tenant.

        Raises:
            ToolError: NOT_FOUND for a forged, expired, foreign or wrong-kind handle (one message).
        """
        prefix = f"{kind}_"
        try:
            if type(handle) is not str or not handle.startswith(prefix):  # a caller may pass anything
                raise InvalidToken("wrong kind")
            claims = self._signer.verify(handle[len(prefix) :])
            if claims.get("k") != kind or claims.get("t") != principal.tenant:
                raise InvalidToken("wrong kind or tenant")
            if self.bind_user and claims.get("u") != principal.user:
                raise InvalidToken("wrong user")
            ref = claims.get("r")
            if not isinstance(ref, str):
                raise InvalidToken("no reference")
            return ref
        except InvalidToken:
            raise ToolError(
                "NOT_FOUND",
                f"No {kind} matches this handle. Pass the handle exactly as the tool that started the "
                f"{kind} returned it; handles cannot be edited or shared between accounts.",
            ) from None
