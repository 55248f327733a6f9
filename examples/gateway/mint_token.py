"""A STAND-IN FOR YOUR IDENTITY PROVIDER: mints the JWT a caller sends to the example's gateway.

    python mint_token.py alice --tenant acme > alice.jwt

In production the gateway checks tokens your IdP issues (`[auth] jwks_url`, the IdP's published
keys) and nobody holds a signing key on their laptop. Here the gateway's `[auth] key_file` is an
HMAC secret, `jwt.key`, which this script creates on first use (48 random bytes, mode 0600) and
signs with; the issuer and audience are the ones `maitre.toml` expects. The token says who the
caller is (`sub`) and in which tenant (`tenant`), and expires (`--minutes`, default 60).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path

import jwt

HERE = Path(__file__).resolve().parent
ISSUER = "https://idp.example.com/"
AUDIENCE = "maitre-gateway-example"


def signing_key(path: Path) -> str:
    """The HMAC secret in `path`, created (0600) if missing."""
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(48))
        print(f"created {path} (the gateway's [auth] key_file)", file=sys.stderr)
    return path.read_text().strip()


def mint(user: str, tenant: str, key: str, minutes: float = 60) -> str:
    now = int(time.time())
    claims = {
        "sub": user,
        "tenant": tenant,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + int(minutes * 60),
    }
    return jwt.encode(claims, key, algorithm="HS256")


def main() -> None:
    parser = argparse.ArgumentParser(description="Mint a JWT for the gateway example (a stand-in IdP).")
    parser.add_argument("user")
    parser.add_argument("--tenant", default="acme")
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--key-file", type=Path, default=HERE / "jwt.key")
    args = parser.parse_args()
    print(mint(args.user, args.tenant, signing_key(args.key_file), args.minutes))


if __name__ == "__main__":
    main()
