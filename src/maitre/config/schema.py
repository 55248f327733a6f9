"""What `maitre.toml` (or `[tool.maitre]` in pyproject.toml) may say, as pydantic models.

Every section forbids unknown keys, so a typo (`[stores] ulr = ...`) is an error naming the key
and the file instead of a setting silently ignored. Values are validated here, once, so a command
never starts with a setting it would refuse later (an unknown JWT algorithm, a Redis URL where
the stores must go, a port out of range).

```toml
stores = "maitre.db"                     # or a [stores] table: url, rate_limits, tasks

[auth]                                   # JWT bearer tokens for `maitre serve --transport http`
issuer = "https://id.example.com/"
resource_url = "https://tools.example.com/mcp"   # the RFC 9728 metadata's resource; the audience
jwks_url = "https://id.example.com/.well-known/jwks.json"   # or key_file = "issuer.pem"
algorithms = ["RS256"]

[policy]                                 # the default policy's knobs
approver_role = "approver"
matrix = { "write.medium" = "needs_approval" }

[budgets]
max_calls_per_run = 50
rate_limit = { per_second = 2, burst = 5 }

[approvals]
ttl_s = 3600

[audit]
arguments = "redacted"

[serve]
target = "app.py:box"
transport = "http"
port = 8000

[tracing]
otlp = "http://127.0.0.1:4318"

[model]                                  # maitre demo / eval / agentdojo without --model
spec = "openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder"
temperature = 0
seed = 7
max_output_tokens = 512

[console]                                # `maitre console`: who may sign in, how sessions are signed
oidc_issuer = "https://id.example.com/"  # sign in with OIDC (authorization code + PKCE)
oidc_client_id = "maitre-console"
local_accounts = false                   # only the issuer's people (default: local accounts too)

[mcp.upstreams.github]
url = "https://api.githubcopilot.com/mcp/"
headers = { Authorization = "Bearer $GITHUB_TOKEN" }

[mcp.upstreams.reports]                  # each caller's token exchanged for one (RFC 8693)
url = "https://reports.example.com/mcp"
auth = "token_exchange"
issuer = "https://id.example.com/"
client_id = "maitre-gateway"
client_secret = "$GATEWAY_SECRET"
audience = "reports-api"

[mcp.upstreams.reports.tools.latest_report]   # the operator's policy for one tool
effect = "read"
risk = "low"
scopes = ["reports:read"]                # a token without it: 403 insufficient_scope
```
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from ..gate.budget import Budgets
    from ..policy import DefaultPolicy

__all__ = [
    "ApprovalsConfig",
    "AuditConfig",
    "AuthConfig",
    "BudgetsConfig",
    "ConsoleConfig",
    "GatewayConfig",
    "JWT_ALGORITHMS",
    "MaitreConfig",
    "McpConfig",
    "ModelConfig",
    "PolicyConfig",
    "RateLimitConfig",
    "ServeConfig",
    "StoresConfig",
    "ToolOverrideConfig",
    "TracingConfig",
    "UpstreamConfig",
    "check_jwt_algorithms",
    "check_store_url",
]

JWT_ALGORITHMS = frozenset(
    {
        "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES256K", "ES384", "ES512",
        "ES521", "PS256", "PS384", "PS512", "EdDSA",
    }
)  # fmt: skip
"""The JWS algorithms a verifier may accept (pyjwt's names; `none` is never one of them)."""


def check_jwt_algorithms(algorithms: list[str]) -> list[str]:
    """`algorithms` unchanged when each is a known JWS algorithm; else a ValueError naming it."""
    for name in algorithms:
        if name not in JWT_ALGORITHMS:
            known = ", ".join(sorted(JWT_ALGORITHMS))
            raise ValueError(f"unknown JWT algorithm {name!r}; use one of {known}")
    if not algorithms:
        raise ValueError("name at least one JWT algorithm")
    return algorithms


def check_store_url(url: str) -> str:
    """`url` when the gate's stores can live there; else a ValueError saying what to write."""
    if url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(
            f"{url!r}: Redis holds only rate limits; give it as --rate-limits (or [stores] rate_limits) "
            "beside a SQLite path or postgresql:// URL for the stores"
        )
    if "://" in url and not url.startswith(("sqlite://", "postgresql://", "postgres://", "memory://")):
        raise ValueError(
            f"unknown store URL {url!r}: use a file path, sqlite:///path.db, postgresql://... or memory://"
        )
    if not url.strip():
        raise ValueError("the store URL is empty")
    return url


class _Section(BaseModel):
    """A table of the file: unknown keys are errors, values are never changed after loading."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StoresConfig(_Section):
    """Where the gate keeps approvals, idempotency, audit, handles and runs (and MCP tasks)."""

    url: str | None = None
    """A SQLite file path (relative to the config file), `sqlite:///path.db` or `postgresql://...`."""
    rate_limits: str | None = None
    """A `redis://` URL to keep rate limits in Redis (shared by every replica)."""
    tasks: str | None = None
    """Where MCP task state lives; default: the same place as `url`."""

    @field_validator("url", "tasks")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        return None if value is None else check_store_url(value)

    @field_validator("rate_limits")
    @classmethod
    def _redis(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"rate_limits must be a redis:// URL, not {value!r}")
        return value


class AuthConfig(_Section):
    """JWT bearer tokens `maitre serve` accepts over HTTP (signature, issuer, audience, expiry)."""

    issuer: str | None = None
    """Expected `iss`; setting it turns authentication on."""
    audience: str | list[str] | None = None
    """This server's identifier; a token minted for another audience is refused. Default: the
    resource URL (RFC 8707: a token is for the resource it was asked for)."""
    resource_url: str | None = None
    """This server's public URL, its resource identifier: published in the RFC 9728 protected-resource
    metadata (for `maitre serve` and `maitre gateway` alike; `[serve] resource_url` is the older place),
    and the audience the tokens must carry."""
    jwks_url: str | None = None
    """The issuer's JSON Web Key Set (fetched, cached, refreshed on an unknown `kid`)."""
    key_file: Path | None = None
    """The issuer's public key (PEM) or an HMAC secret, instead of `jwks_url`."""
    algorithms: list[str] | None = None
    """Accepted algorithms; default RS256/ES256/EdDSA (HS256 for a secret key file)."""
    tenant_claim: str = "tenant"
    """The claim that holds the caller's tenant."""
    default_tenant: str | None = None
    """Tenant for tokens without that claim (unset: such tokens are refused)."""
    jwks_ttl_s: float = Field(default=300.0, gt=0)
    """How long a fetched key set is trusted before it is fetched again."""

    @field_validator("algorithms")
    @classmethod
    def _algorithms(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_jwt_algorithms(value)

    @model_validator(mode="after")
    def _one_key_source(self) -> AuthConfig:
        if self.jwks_url and self.key_file:
            raise ValueError("give jwks_url or key_file, not both")
        if self.issuer and not self.audience and not self.resource_url:
            raise ValueError("issuer needs audience or resource_url (this server's identifier in the tokens)")
        if self.issuer and not (self.jwks_url or self.key_file):
            raise ValueError("issuer needs jwks_url or key_file (where the signing keys come from)")
        return self


_MATRIX_KEYS = frozenset(
    f"{effect}.{risk}"
    for effect in ("read", "write", "destructive")
    for risk in ("low", "medium", "high", "critical")
)


class PolicyConfig(_Section):
    """The default policy's settings (seed 003's risk matrix, self-approval, approver role)."""

    allow_self_approval: bool = False
    """Whether the person who made a call may approve it."""
    approver_role: str | None = None
    """When set, only principals with this role may approve."""
    taint_requires_approval: bool = True
    """Untrusted content in a run makes open-world writes and egress reads need approval."""
    taint: Literal["data-flow", "run"] = "data-flow"
    """After untrusted content: ask only for argument values that cannot be traced to the user's
    request or trusted results (`data-flow`, in an agent's runs), or for every open-world write
    and egress read (`run`). Runs that trace nothing (the MCP and gateway doors') use `run` anyway."""
    matrix: dict[str, Literal["allow", "deny", "needs_approval"]] = Field(default_factory=dict)
    """Changes to the risk matrix, keyed `effect.risk`, e.g. `"write.medium" = "needs_approval"`."""

    @field_validator("matrix")
    @classmethod
    def _matrix_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key not in _MATRIX_KEYS:
                raise ValueError(
                    f"unknown matrix key {key!r}: use EFFECT.RISK with EFFECT read|write|destructive "
                    "and RISK low|medium|high|critical"
                )
        return value

    def build(self) -> DefaultPolicy:
        """The `DefaultPolicy` these settings describe."""
        from ..policy import DEFAULT_RISK_MATRIX, Action, DefaultPolicy
        from ..types import Effect, Risk

        matrix = dict(DEFAULT_RISK_MATRIX)
        for key, action in self.matrix.items():
            effect, _, risk = key.partition(".")
            matrix[(Effect(effect), Risk(risk))] = Action(action)
        return DefaultPolicy(
            matrix=matrix,
            allow_self_approval=self.allow_self_approval,
            approver_role=self.approver_role,
            taint_requires_approval=self.taint_requires_approval,
            taint=self.taint,
        )


class RateLimitConfig(_Section):
    """A token bucket: `burst` calls at once, refilled at `per_second`."""

    per_second: float = Field(gt=0)
    burst: int = Field(ge=1)


class BudgetsConfig(_Section):
    """Limits on what one run may execute, and how fast a principal may call."""

    max_calls_per_run: int | None = Field(default=200, ge=1)
    """Executed calls in one run."""
    per_tool: dict[str, int] = Field(default_factory=dict)
    """Executed calls per tool per run, by canonical name."""
    per_class: dict[str, int] = Field(default_factory=dict)
    """Executed calls per effect class per run, e.g. `{ write = 3 }`."""
    rate_limit: RateLimitConfig | None = None
    """Default bucket per (tenant, user, tool)."""
    rate_limits: dict[str, RateLimitConfig] = Field(default_factory=dict)
    """Buckets for specific tools, by canonical name."""

    @field_validator("per_class")
    @classmethod
    def _classes(cls, value: dict[str, int]) -> dict[str, int]:
        for key in value:
            if key not in ("read", "write", "destructive"):
                raise ValueError(f"unknown effect class {key!r}: use read, write or destructive")
        return value

    def build(self) -> Budgets:
        """The gate's `Budgets`."""
        from ..gate.budget import Budgets, RateLimit

        def bucket(limit: RateLimitConfig) -> RateLimit:
            return RateLimit(per_second=limit.per_second, burst=limit.burst)

        return Budgets(
            max_calls_per_run=self.max_calls_per_run,
            per_tool=dict(self.per_tool),
            per_class=dict(self.per_class),
            rate_limit=bucket(self.rate_limit) if self.rate_limit else None,
            rate_limits={name: bucket(limit) for name, limit in self.rate_limits.items()},
        )


class ApprovalsConfig(_Section):
    """How approval requests behave."""

    ttl_s: float = Field(default=24 * 3600.0, gt=0)
    """How long a request stays decidable and an approval usable."""
    cli_roles: dict[str, list[str]] = Field(default_factory=dict)
    """Roles an operating-system user holds when deciding from the command line, e.g.
    `alice = ["approver"]` (for `[policy] approver_role`). The OS account is the identity; a name
    given with `--approver` never gains a role."""


class AuditConfig(_Section):
    """The hash-chained audit log of every call."""

    enabled: bool = True
    """Record every call when the stores are durable."""
    arguments: Literal["digest", "redacted"] = "digest"
    """What the log keeps of the arguments: a digest, or the arguments with secrets redacted."""


class ServeConfig(_Section):
    """`maitre serve`'s defaults (each flag overrides its key)."""

    target: str | None = None
    """`MODULE_OR_FILE:ATTR` of the MCPApp or Toolbox to serve."""
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    path: str = "/mcp"
    user: str = "local"
    """Principal for stdio and unauthenticated HTTP."""
    tenant: str = "local"
    scopes: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    resource_url: str | None = None
    """Public URL of this server (RFC 9728 metadata)."""
    allow_hosts: list[str] = Field(default_factory=list)
    allow_origins: list[str] = Field(default_factory=list)
    stateless_legacy: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path must start with '/', e.g. '/{value}'")
        return value


class TracingConfig(_Section):
    """Where traces go."""

    otlp: str | None = None
    """An OTLP/HTTP endpoint, e.g. `http://127.0.0.1:4318`."""


class ModelConfig(_Section):
    """[model]: the model `maitre demo`, `maitre eval` and `maitre agentdojo` use when `--model` is
    not given, and how it runs. The command line's flags, and options in the `--model` string
    itself (`#MODEL?temperature=0&seed=7`), win over these."""

    spec: str | None = None
    """A `--model` string, e.g. `openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder`."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    seed: int | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    """A cap on each model call's output tokens."""
    request_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds one model request may take."""
    run_seconds: float | None = Field(default=None, gt=0)
    """The time limit of one run (a demo chapter); unset, the command scales it to the model."""
    tools_in_prompt: bool | Literal["auto"] | None = None
    constrained: bool | None = None
    """Constrained tool calls (local servers only); unset: on for local servers, off for hosted ones."""
    schema_dialect: Literal["llama.cpp", "json_schema", "vllm", "ollama"] | None = None
    parallel_calls: bool | None = None


def _issuer_url(value: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme == "https" and parts.hostname:
        return value
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "::1", "localhost"):
        return value
    raise ValueError(f"{value!r}: use an https:// URL (plain http:// only for a loopback address)")


class ConsoleConfig(_Section):
    """`maitre console`: how people sign in (OIDC, local accounts or both) and how sessions are signed."""

    secret: str | None = None
    """Signs session cookies (16+ characters); `MAITRE_CONSOLE_SECRET` wins over it. Unset: a random
    secret per start, so everyone signs in again after a restart."""
    oidc_issuer: str | None = None
    """The OpenID Provider people sign in with (authorization code + PKCE); its discovery document
    is read from `{oidc_issuer}/.well-known/openid-configuration` when the console starts."""
    oidc_client_id: str | None = None
    """The console's client id at the issuer (the ID token's audience)."""
    oidc_client_secret: str | None = None
    """For a confidential client; unset: a public client (PKCE alone)."""
    oidc_redirect_uri: str | None = None
    """The callback URL registered at the issuer, e.g. `https://console.example.com/sign-in/oidc/callback`.
    Unset: derived from each request's own URL (right only when nothing in front rewrites it)."""
    name_claim: str = "sub"
    """The ID token claim that names the person on decisions (falls back to `sub` when absent).
    `sub` is also what `maitre serve` names a bearer by, so self-approval compares one identity."""
    tenant_claim: str = "tenant"
    """The claim that holds the person's tenant (a token without it cannot sign in)."""
    roles_claim: str = "roles"
    """The claim that holds the person's roles (a list or a space-separated string)."""
    local_accounts: bool = True
    """Whether local accounts (`maitre console add-user`) may sign in too."""
    sign_in_limit: int = Field(default=5, ge=1)
    """Sign-in attempts per account and client address within `sign_in_window_s`."""
    sign_in_window_s: float = Field(default=300.0, gt=0)
    session_max_age_s: int = Field(default=8 * 3600, ge=60)
    """How long a session lasts; an OIDC person's tenant and roles are trusted for that long."""

    @field_validator("oidc_issuer", "oidc_redirect_uri")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return None if value is None else _issuer_url(value)

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        if value is not None and len(value) < 16:
            raise ValueError("the console secret must be at least 16 characters")
        return value

    @model_validator(mode="after")
    def _some_sign_in(self) -> ConsoleConfig:
        if self.oidc_issuer and not self.oidc_client_id:
            raise ValueError("oidc_issuer needs oidc_client_id (the console's client at the issuer)")
        if (self.oidc_client_id or self.oidc_client_secret) and not self.oidc_issuer:
            raise ValueError("oidc_client_id needs oidc_issuer")
        if not self.local_accounts and not self.oidc_issuer:
            raise ValueError("local_accounts = false needs oidc_issuer: nobody could sign in")
        return self


_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")
"""An OAuth scope token (RFC 6749 §3.3): printable ASCII without space, `"` or `\\`."""


class ToolOverrideConfig(_Section):
    """`[mcp.upstreams.NAME.tools.TOOL]`: the operator's own policy for one upstream tool (its name as
    the upstream spells it). It replaces what the tool's annotations would suggest, whether or not the
    upstream is in `trust_annotations`: annotations are the server's claims, this is the operator's
    decision, written for a tool held to its pin (a changed definition is withdrawn, not re-judged).
    """

    effect: Literal["read", "write", "destructive"] | None = None
    risk: Literal["low", "medium", "high", "critical"] | None = None
    requires_approval: bool | None = None
    """Force (true) or waive (false) human approval, whatever the risk matrix says."""
    scopes: list[str] = Field(default_factory=list)
    """Scopes a caller's token must hold to call it: a token without them is answered 403
    `insufficient_scope` at the HTTP door, and they are published in `scopes_supported`."""
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    """Seconds before a call is cancelled (default 30)."""
    idempotent: bool | None = None
    open_world: bool | None = None
    egress: bool | None = None
    """A read whose arguments carry data out (a fetch, a third-party search): after untrusted
    content it needs approval like an open-world write."""

    @field_validator("scopes")
    @classmethod
    def _scope_tokens(cls, value: list[str]) -> list[str]:
        for scope in value:
            if not _SCOPE.match(scope):
                raise ValueError(f"{scope!r} is not an OAuth scope (printable ASCII, no spaces or quotes)")
        return value

    def metadata(self) -> dict[str, Any]:
        """The tool metadata given here (`McpUpstream(overrides=...)`), without the keys left out."""
        values: dict[str, Any] = {
            "effect": self.effect,
            "risk": self.risk,
            "requires_approval": self.requires_approval,
            "timeout": self.timeout_s,
            "idempotent": self.idempotent,
            "open_world": self.open_world,
            "egress": self.egress,
        }
        given = {key: value for key, value in values.items() if value is not None}
        if self.scopes:
            given["scopes"] = frozenset(self.scopes)
        return given


class UpstreamConfig(_Section):
    """Another MCP server `maitre mcp pin|check|scan|login --namespace NAME` (and `maitre gateway`)
    talks to.

    OAuth (`maitre.mcp.upstream_auth`): `auth = "client_credentials"` with `client_id`, `issuer`
    and `client_secret` or `private_key_file` (a service credential); `auth = "authorization_code"`
    for a person's sign-in with `maitre mcp login NAME` (`client_id` only for a pre-registered
    client; else the client registers itself, or uses `client_metadata_url`);
    `auth = "token_exchange"` (`maitre.mcp.token_exchange`, RFC 8693): each caller's own token is
    exchanged at `issuer` by the gateway's client (`client_id` + `client_secret` or
    `private_key_file`) for a token for this upstream (`audience` / `resource`, `scopes`), so the
    upstream sees who calls without ever seeing the caller's token.
    """

    url: str | None = None
    """Its Streamable HTTP URL."""
    command: str | list[str] | None = None
    """Or the command line that starts it on stdio."""
    headers: dict[str, str] = Field(default_factory=dict)
    """'Name' = 'value' sent to it (`$VARS` expand when used; shown masked)."""
    allow_loopback: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    auth: Literal["none", "client_credentials", "authorization_code", "token_exchange"] = "none"
    """How maitre gets a token for it: none, a service credential, a person's sign-in, or the
    caller's token exchanged for one (RFC 8693)."""
    client_id: str | None = None
    """The OAuth client id (required for client_credentials and token_exchange; a pre-registered
    client otherwise)."""
    client_secret: str | None = None
    """Its secret (`$VARS` expand when used; shown masked)."""
    private_key_file: Path | None = None
    """Or a PEM private key that signs a `private_key_jwt` assertion (client_credentials,
    token_exchange)."""
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    """How `client_secret` is sent to the token endpoint."""
    issuer: str | None = None
    """The authorization server the credentials belong to; no other is used (required for
    client_credentials and token_exchange, so the upstream cannot send a secret elsewhere)."""
    token_endpoint: str | None = None
    """token_exchange: the issuer's token endpoint (default: read from its RFC 8414 / OpenID
    metadata, whose `issuer` must be `issuer`)."""
    audience: str | None = None
    """token_exchange: the logical name of the upstream the exchanged token is for (RFC 8693 `audience`)."""
    resource: str | None = None
    """token_exchange: the upstream's resource URI (RFC 8707 `resource`); default: `url` when no
    `audience` is given."""
    scopes: list[str] = Field(default_factory=list)
    """Scopes to ask for (the upstream's challenge or metadata can name more)."""
    client_metadata_url: str | None = None
    """An https URL of this client's metadata document, used as its id where servers take one (CIMD)."""
    tools: dict[str, ToolOverrideConfig] = Field(default_factory=dict)
    """Per upstream tool (as the upstream names it): the operator's policy, see `ToolOverrideConfig`.
    A name the upstream does not offer is reported when it is imported."""

    @model_validator(mode="after")
    def _one_target(self) -> UpstreamConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError("give url or command (exactly one)")
        return self

    @model_validator(mode="after")
    def _auth_keys(self) -> UpstreamConfig:
        oauth_keys = (
            "client_id", "client_secret", "private_key_file", "issuer", "client_metadata_url",
            "token_endpoint", "audience", "resource",
        )  # fmt: skip
        given = [key for key in oauth_keys if getattr(self, key) is not None] + (
            ["scopes"] if self.scopes else []
        )
        if self.auth == "none":
            if given:
                raise ValueError(
                    f'{", ".join(given)} only apply with auth = "client_credentials", '
                    '"authorization_code" or "token_exchange"'
                )
            return self
        if self.url is None:
            raise ValueError(f"auth = {self.auth!r} needs a url: OAuth is for HTTP upstreams")
        if any(name.lower() == "authorization" for name in self.headers):
            raise ValueError(
                f"auth = {self.auth!r} sends its own Authorization header: remove it from headers"
            )
        if self.issuer is not None and not self.issuer.startswith(("https://", "http://")):
            raise ValueError(f"issuer {self.issuer!r} must be the authorization server's http(s) URL")
        exchange_only = [
            k for k in ("token_endpoint", "audience", "resource") if getattr(self, k) is not None
        ]
        if exchange_only and self.auth != "token_exchange":
            raise ValueError(f'{", ".join(exchange_only)} only apply with auth = "token_exchange"')
        if self.auth in ("client_credentials", "token_exchange"):
            missing = [key for key in ("client_id", "issuer") if getattr(self, key) is None]
            if missing:
                raise ValueError(f'auth = "{self.auth}" needs {" and ".join(missing)}')
            if (self.client_secret is None) == (self.private_key_file is None):
                raise ValueError(
                    f'auth = "{self.auth}" needs client_secret or private_key_file (exactly one)'
                )
            if self.client_metadata_url is not None:
                raise ValueError("client_metadata_url is for authorization_code")
            if self.token_endpoint is not None and not self.token_endpoint.startswith(
                ("https://", "http://")
            ):
                raise ValueError(f"token_endpoint {self.token_endpoint!r} must be an http(s) URL")
        else:
            if self.private_key_file is not None:
                raise ValueError("private_key_file is for client_credentials and token_exchange")
            if self.client_secret is not None and self.client_id is None:
                raise ValueError("client_secret needs the client_id it belongs to")
            if self.client_metadata_url is not None and not self.client_metadata_url.startswith("https://"):
                raise ValueError("client_metadata_url must be an https URL")
        return self

    def target(self) -> str:
        """The URL or command line, as the `mcp` commands take it."""
        if self.url is not None:
            return self.url
        if isinstance(self.command, list):
            import shlex

            return shlex.join(self.command)
        return str(self.command)


class McpConfig(_Section):
    """MCP client settings."""

    lockfile: Path = Path("maitre.mcp.lock.json")
    """The lockfile `mcp pin` writes and `mcp check` compares with."""
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict)
    """Upstream servers by namespace."""


class GatewayConfig(_Section):
    """`maitre gateway`: every `[mcp.upstreams.NAME]` behind one governed endpoint (each flag
    overrides its key; the stores and JWT checks come from `[stores]` and `[auth]`)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8100, ge=1, le=65535)
    path: str = "/mcp"
    trust_annotations: list[str] = Field(default_factory=list)
    """Upstreams whose MCP annotations may lower policy (`readOnlyHint` → a read without approval);
    the others' tools are all destructive and high risk, whatever they claim."""
    retry_max_s: float = Field(default=30.0, gt=0)
    """The longest wait between attempts to reach an upstream that is down (the wait doubles)."""
    poll_s: float = Field(default=30.0, gt=0)
    """How often each upstream is checked (a `tools/list`) and, without a listen stream, its
    resources and prompts listed again; two unanswered checks in a row take it down."""
    list_timeout_s: float = Field(default=5.0, gt=0)
    """How long one upstream's resource or prompt listing may take before that answer leaves it out."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path must start with '/', e.g. '/{value}'")
        return value


class MaitreConfig(_Section):
    """The whole file. Every section is optional; a missing one takes its defaults."""

    stores: StoresConfig = Field(default_factory=StoresConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    budgets: BudgetsConfig = Field(default_factory=BudgetsConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)

    @field_validator("stores", mode="before")
    @classmethod
    def _stores_shorthand(cls, value: Any) -> Any:
        return {"url": value} if isinstance(value, str) else value
