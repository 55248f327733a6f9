"""Approval over MCP: the gate's APPROVAL_REQUIRED asked of a person through the client.

The gate decides that a call needs approval and issues an `ApprovalTicket`; this module only
carries the question and the answer over the wire, on whichever branch the request allows:

1. **2026-07-28, `input_required`.** The result holds an `elicitation/create` request under
   `APPROVAL_INPUT_KEY` and a `requestState` with an HMAC-signed claim (approval id, call hash,
   tool, tenant, user). The SDK's `RequestStateBoundary` seals that state again (AES-GCM, bound to
   the method, the arguments' digest and the authenticated principal), so a replayed, altered or
   foreign state is refused before anything runs; the client's retry carries the answer, which is
   recorded, and the gate re-checks the call hash anyway.
2. **2025-11-25, inline elicitation.** On a session whose client declared elicitation the server
   asks with `elicitation/create` while the call waits, records the answer and calls again.
3. **Out of band.** When the caller may not approve their own call (or the client cannot be
   asked) the result says so with the approval id; whoever may approve decides elsewhere, and the
   host retries with `_meta[APPROVAL_META_KEY]`, a claim the gate verifies.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel

from ..gate import CallOptions, Gate
from ..jsonutil import compact_json
from ..types import ApprovalTicket, Principal, ToolCall, ToolResult
from .context import McpCallContext
from .signing import InvalidToken, Signer
from .wire import call_tool_result, governed_call, input_required_result

__all__ = ["APPROVAL_INPUT_KEY", "APPROVAL_META_KEY", "McpApprovals"]

logger = logging.getLogger("maitre.mcp.server")

APPROVAL_INPUT_KEY = "maitre_approval"
"""The `inputRequests` key of the approval elicitation."""
APPROVAL_META_KEY = "io.maitre/approvalId"
"""Request `_meta` key a host sets to retry a call under an approval decided out of band."""
_APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "Run this exact call now?"},
        "reason": {"type": "string", "title": "Reason", "description": "Optional note for the audit log"},
    },
    "required": ["approve"],
}


class McpApprovals:
    """Asks for the approvals the gate requires and records the answers the client sends back."""

    def __init__(self, gate: Gate, signer: Signer, *, ttl_s: float) -> None:
        self.gate = gate
        """Whose policy says who may approve, whose approval service records the decision."""
        self.signer = signer
        """Signs and verifies the approval claim carried in `requestState`."""
        self.ttl_s = ttl_s
        """How long a signed claim stays valid."""

    async def ask(
        self,
        call: ToolCall,
        principal: Principal,
        result: ToolResult,
        ticket: ApprovalTicket,
        call_ctx: McpCallContext,
        options: CallOptions,
    ) -> Any:
        """The answer to a call the gate held for approval, on the branch this request allows."""
        assert result.error is not None
        approval_id = ticket.approval_id
        message = f"Approve {ticket.tool} with {compact_json(ticket.arguments)}? {result.error.message}"
        why_not = self.gate.policy.may_approve(principal, principal.user, principal.tenant)
        if why_not:
            # The caller may not confirm their own call: another person decides it out of band.
            out_of_band = result.error.message + (
                f" Approval id: {approval_id}. Once someone allowed to approve it has done so, the host can "
                f"retry this exact call with _meta['{APPROVAL_META_KEY}'] = '{approval_id}'."
            )
            shaped = call_tool_result(result, call_ctx, self.gate.toolbox.get(call.name))
            shaped.content = [types.TextContent(type="text", text=out_of_band)]
            return shaped
        if call_ctx.modern and call_ctx.supports("elicitation"):
            claims = {
                "a": approval_id,
                "h": ticket.call_hash,
                "n": call.name,
                "t": principal.tenant,
                "u": principal.user,
            }
            token = self.signer.sign(claims, ttl_s=self.ttl_s)
            request = {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": message, "requestedSchema": _APPROVAL_SCHEMA},
            }
            return input_required_result({APPROVAL_INPUT_KEY: request}, {"approval": token})
        if call_ctx.can_ask and call_ctx.supports("elicitation"):
            answer = await call_ctx.elicit(message, _APPROVAL_SCHEMA)
            await self._decide(approval_id, principal, answer.model_dump(by_alias=True, mode="json"))
            retried = await governed_call(
                self.gate, call, principal, call_ctx, dataclasses.replace(options, approval_id=approval_id)
            )
            return call_tool_result(retried, call_ctx, self.gate.toolbox.get(call.name))
        return call_tool_result(result, call_ctx, self.gate.toolbox.get(call.name))

    async def claim(self, token: Any, tool: str, principal: Principal, call_ctx: McpCallContext) -> str:
        """The approval id of a signed claim from `requestState`, with the client's answer recorded.

        A claim that does not verify, or was issued for another tool or principal, is refused as an
        invalid request state before anything runs.
        """
        try:
            claims = self.signer.verify(token)
        except InvalidToken as exc:
            logger.warning("approval state refused: %s", exc)
            raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState") from None
        if (claims.get("n"), claims.get("t"), claims.get("u")) != (tool, principal.tenant, principal.user):
            logger.warning("approval state refused: bound to another call or principal")
            raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState")
        approval_id = str(claims["a"])
        answer = call_ctx.input_responses.get(APPROVAL_INPUT_KEY)
        if answer is not None:
            data = answer.model_dump(by_alias=True, mode="json") if isinstance(answer, BaseModel) else answer
            await self._decide(approval_id, principal, data)
        return approval_id

    async def _decide(self, approval_id: str, principal: Principal, answer: Mapping[str, Any]) -> None:
        approvals = self.gate.approvals
        content = answer.get("content") or {}
        approved = answer.get("action") == "accept" and content.get("approve") is True
        reason = str(content.get("reason") or "")[:500]
        try:
            if approved:
                await approvals.approve(approval_id, approver=principal, note=reason or "confirmed over MCP")
            else:
                await approvals.deny(approval_id, approver=principal, message=reason or "declined over MCP")
        except Exception:  # an already-decided or expired approval: the gate's re-check decides
            logger.info("approval %s could not be recorded again", approval_id, exc_info=True)
