"""One configuration file for every command: `maitre.toml`, or `[tool.maitre]` in pyproject.toml.

`load_settings()` finds and validates it (`files`); `schema` says what it may hold (unknown keys
are errors naming the key and the file); `show` renders the effective values with secrets
masked. Flags override the file; the file overrides the defaults.

Layer: core. It reads files and builds the default policy and budgets; it imports no door.
"""

from __future__ import annotations

from .files import CONFIG_ENV, ConfigError, Settings, choose_config, find_config, load_settings
from .schema import (
    ApprovalsConfig,
    AuditConfig,
    AuthConfig,
    BudgetsConfig,
    ConsoleConfig,
    MaitreConfig,
    McpConfig,
    PolicyConfig,
    RateLimitConfig,
    ServeConfig,
    StoresConfig,
    TracingConfig,
    UpstreamConfig,
    check_jwt_algorithms,
    check_store_url,
)
from .show import Row, effective_rows, mask_url

__all__ = [
    "ApprovalsConfig",
    "AuditConfig",
    "AuthConfig",
    "BudgetsConfig",
    "CONFIG_ENV",
    "ConfigError",
    "ConsoleConfig",
    "MaitreConfig",
    "McpConfig",
    "PolicyConfig",
    "RateLimitConfig",
    "Row",
    "ServeConfig",
    "Settings",
    "StoresConfig",
    "TracingConfig",
    "UpstreamConfig",
    "check_jwt_algorithms",
    "check_store_url",
    "choose_config",
    "effective_rows",
    "find_config",
    "load_settings",
    "mask_url",
]
