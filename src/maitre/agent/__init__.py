"""The agent loop: brakes, parallel calls, durable pause/resume for approvals, short-term memory."""

from .context_manager import ContextManager
from .limits import Limits, StopReason
from .loop import Agent, ApprovalDecision
from .messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from .notes import notes_toolbox
from .run import PendingCall, Run, RunStatus

__all__ = [
    "Agent",
    "ApprovalDecision",
    "AssistantMessage",
    "ContextManager",
    "Limits",
    "Message",
    "PendingCall",
    "Run",
    "RunStatus",
    "StopReason",
    "ToolResultMessage",
    "UserMessage",
    "notes_toolbox",
]
