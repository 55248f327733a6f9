"""The agent loop: brakes, parallel calls, durable pause/resume for approvals, short-term memory.

Layer: a door. The loop imports the core (`maitre.gate`, `maitre.messages`, `maitre.stores`, ...)
and the `maitre.models` and `maitre.search` doors through their public names; nothing in the core
or in `maitre.models` imports it. Its conversation types live in the core, in `maitre.messages`
(`maitre.agent.messages` re-exports them). See `maitre` for the layer rules.
"""

from .context_manager import ContextManager
from .limits import Limits, StopReason
from .loop import Agent, ApprovalDecision
from .messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from .notes import notes_toolbox
from .run import PendingCall, Run, RunStatus
from .worker import ResumeWorker

__all__ = [
    "Agent",
    "ApprovalDecision",
    "AssistantMessage",
    "ContextManager",
    "Limits",
    "Message",
    "PendingCall",
    "ResumeWorker",
    "Run",
    "RunStatus",
    "StopReason",
    "ToolResultMessage",
    "UserMessage",
    "notes_toolbox",
]
