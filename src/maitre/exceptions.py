"""Exceptions for developers. Nothing a model sends ever becomes one of these.

```
MaitreError
 ├── UserError               a usage mistake by the application developer (you!)
 │    ├── ToolDefinitionError    a function cannot become a tool (bad signature, bad metadata)
 │    ├── DuplicateToolError     two tools with the same canonical name in one toolbox
 │    └── MissingExtraError      an optional extra is not installed; says which `pip install`
 │                               (maitre._extras; also an ImportError)
 ├── StoreError              a store could not do what was asked (raised by maitre.stores)
 │    ├── AlreadyExistsError, ApprovalStateError, IdempotencyStateError, StoreBusyError
 ├── ModelError              a model could not be reached after retries (maitre.models)
 └── EmbeddingModelError     the offline embedding model is missing or fails its hash check
```

`maitre.types.ToolError` is not in this tree on purpose: it is a *signal* that tool code raises to
report a business failure, and the gate turns it into a `ToolResult`; it never leaves the gate.
"""

from __future__ import annotations

__all__ = ["DuplicateToolError", "MaitreError", "StoreError", "ToolDefinitionError", "UserError"]


class MaitreError(Exception):
    """Base class of every exception maitre raises to developers."""


class UserError(MaitreError):
    """The application developer used maitre wrongly; the message says how to fix it."""


class ToolDefinitionError(UserError):
    """A function or its metadata cannot be turned into a tool."""


class DuplicateToolError(UserError):
    """A toolbox already has a tool with this canonical name."""


class StoreError(MaitreError):
    """A store failed; raised by maitre.stores implementations."""
