"""`maitre console ...`: serve the approval console, and create its local accounts.

`maitre console --stores shop.db --port 8765` serves the console over the same stores the gate
writes (it never creates them: the store must exist). `maitre console add-user NAME --tenant T
--role approver` creates or replaces a local account: the password is read from a hidden prompt (or
one line of stdin with `--password-stdin`) and stored only as an argon2 hash, in the stores' own
database. Sessions are signed with `MAITRE_CONSOLE_SECRET` (else `[console] secret`); without
either a random secret is made at start, so everyone signs in again after a restart.

The `[console]` section of the configuration file says how people sign in: `oidc_issuer` and
`oidc_client_id` add "Sign in with <issuer>" (authorization code + PKCE, see `maitre.console.oidc`),
`local_accounts = false` leaves only that, `sign_in_limit` / `sign_in_window_s` bound sign-in
attempts (counted in the stores, so console replicas share the count). The issuer's discovery
document is read before the console starts: an issuer that cannot be used is one line and exit 2.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from .app import App, console, settings
from .errors import CommandError, guard
from .stores import STORES, check_existing, run_on_stores, store_url

if TYPE_CHECKING:
    from ..stores import Stores

__all__ = ["SECRET_ENV", "app", "console_add_user", "console_serve"]

SECRET_ENV = "MAITRE_CONSOLE_SECRET"

app = App(
    help="The approval console: a web page where signed-in people decide pending calls.",
    no_args_is_help=False,
    invoke_without_command=True,
)


@app.callback()
def console_serve(
    ctx: typer.Context,
    db: str | None = STORES,
    host: str = typer.Option("127.0.0.1", "--host", help="The address to listen on"),
    port: int = typer.Option(8765, "--port", help="The port to listen on"),
    resume_agent: str | None = typer.Option(
        None,
        "--resume-agent",
        help="FILE.py:FACTORY or module:FACTORY (stores -> Agent): resume paused runs once decided, "
        "and validate edits with its tools",
    ),
    tools: str | None = typer.Option(
        None, "--tools", help="MODULE_OR_FILE:ATTR toolbox, so edited arguments are validated by the gate"
    ),
) -> None:
    """Serve the approval console (without a subcommand) over the gate's stores."""
    if ctx.invoked_subcommand is not None:
        return
    guard(_serve)(db, host, port, resume_agent, tools)


def _serve(db: str | None, host: str, port: int, resume_agent: str | None, tools: str | None) -> None:
    from .._extras import require

    require("console", "maitre console")
    import secrets

    import anyio
    import uvicorn

    from ..agent import ResumeWorker
    from ..console.app import create_app
    from ..console.oidc import OIDCSettings
    from ..console.security import StoreSignInThrottle
    from ..stores import open_stores
    from .loader import load_toolbox
    from .runs import _build_agent, _load_factory

    url = store_url(db)
    check_existing(url)
    config = settings().config
    section = config.console
    secret = os.environ.get(SECRET_ENV) or section.secret
    if not secret:
        secret = secrets.token_urlsafe(32)
        typer.echo(f"note: {SECRET_ENV} is not set; sessions end when the console restarts", err=True)
    elif len(secret) < 16:
        raise CommandError(f"refused: {SECRET_ENV} must be at least 16 characters", code=2)
    policy = config.policy.build()
    oidc = OIDCSettings.from_config(section)
    factory = _load_factory(resume_agent) if resume_agent else None
    toolbox = load_toolbox(tools) if tools else None

    async def main() -> None:
        signing_in = oidc
        if signing_in is not None:  # the issuer is read now: a wrong one is found at start
            signing_in = await signing_in.discovered()
        async with await open_stores(url) as stores:
            agent = _build_agent(factory, resume_agent or "", stores) if factory else None
            if agent is not None:  # its gate's tools and policy are the ones these requests came from
                box = toolbox if toolbox is not None else agent.gate.toolbox
                web_policy = agent.gate.policy
            else:
                box, web_policy = toolbox, policy
            web = create_app(
                stores,
                secret=secret,
                policy=web_policy,
                toolbox=box,
                oidc=signing_in,
                local_accounts=section.local_accounts,
                throttle=StoreSignInThrottle(
                    stores.rate_limits, limit=section.sign_in_limit, window_s=section.sign_in_window_s
                ),
                session_max_age_s=section.session_max_age_s,
            )
            served = uvicorn.Config(web, host=host, port=port, log_level="warning", lifespan="off")
            how = " and ".join(
                ([f"OIDC ({signing_in.issuer})"] if signing_in else [])
                + (["local accounts"] if section.local_accounts else [])
            )
            typer.echo(f"maitre console on http://{host}:{port}/ (stores: {url}; sign-in: {how})", err=True)
            if agent is None:
                await uvicorn.Server(served).serve()
                return
            typer.echo(f"resuming decided runs with {resume_agent}", err=True)
            stop = anyio.Event()
            async with anyio.create_task_group() as group:

                def resumed(run: Any) -> None:
                    typer.echo(f"resumed run {run.id}: {run.status} ({run.stop_reason})", err=True)

                group.start_soon(ResumeWorker(agent, on_resume=resumed).run_forever, stop)
                try:
                    await uvicorn.Server(served).serve()
                finally:
                    stop.set()

    anyio.run(main)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if len(password) < 8:
        raise CommandError("refused: a console password needs at least 8 characters", code=2)
    return password


@app.command("add-user")
def console_add_user(
    name: str = typer.Argument(..., help="The account name (the identity recorded on decisions)"),
    tenant: str = typer.Option(..., "--tenant", help="The tenant whose requests this person sees"),
    role: list[str] = typer.Option([], "--role", help="A role (repeatable); `approver` may decide requests"),
    db: str | None = STORES,
    password_stdin: bool = typer.Option(
        False, "--password-stdin", help="Read the password from one line of stdin instead of a prompt"
    ),
) -> None:
    """Create (or replace) a local console account; the password is stored as an argon2 hash only."""
    from .._extras import require

    require("console", "maitre console add-user")
    from ..console.accounts import Account, MemoryAccountStore, account_store, hash_password

    name, tenant = name.strip(), tenant.strip()
    if not name or not tenant:
        raise CommandError("refused: the account name and tenant cannot be empty", code=2)
    url = store_url(db)
    check_existing(url)  # before asking for a password the command could not store
    hashed = hash_password(_password(password_stdin))

    async def job(stores: Stores) -> bool:
        accounts = account_store(stores)
        if isinstance(accounts, MemoryAccountStore):
            raise CommandError("refused: accounts need a SQLite or Postgres store, not memory://", code=2)
        existed = await accounts.get(name) is not None
        await accounts.put(Account(name=name, tenant=tenant, roles=frozenset(role), password_hash=hashed))
        return existed

    existed = run_on_stores(url, job)
    roles = ", ".join(sorted(set(role))) or "no roles"
    verb = "replaced" if existed else "created"
    console.print(f"{verb} console account {name} (tenant {tenant}; {roles})", highlight=False, markup=False)
