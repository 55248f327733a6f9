"""Is this a secret? Decided by what the value looks like and what the key says it is, together.

Long-term memory must never hold secrets (seed 000): card numbers, passwords, PINs, API keys. The
first filter refused any key *containing* a secret word, so `pin_code = 560001` (an Indian postal
code is a "PIN code"), `dress_code`, `discount_code` and `token_budget` were refused too (issue 16),
and a model told "not saved: looks like a secret" learns nothing true. The rules now:

1. **The value's shape alone** is enough: a Luhn-valid card number, a provider key shape (`sk-...`,
   `AKIA...`, `ghp_...`, `xoxb-...`, `AIza...`), a JWT, a PEM private key, "my password is ...",
   or a long random-looking token (letters, digits and mixed case, 32+ characters, no spaces).
2. **The key names a secret** when a secret word is in it (`password`, `passcode`, `cvv`, `ssn`,
   `otp`, `api_key`, `private_key`, `card_number`, `iban`, ...), unless the key is *about* that
   secret rather than holding it (`password_manager`), or when its *head* (last word) is a secret
   noun: `secret`, `token` (so `github_token`, not `token_budget`), `pin` (so `atm_pin`).
3. **A code is secret only when qualified as one**: `door_code`, `security_code`, `backup_code`,
   `verification_code`, but not `dress_code`, `discount_code`, `zip_code` or `country_code`.
4. **`pin_code` is read by its value**: six digits shaped like a postal PIN (`560001`) is an
   address; anything else (`4821`) is a PIN.
"""

from __future__ import annotations

import re

__all__ = ["key_names_secret", "looks_secret", "value_looks_secret"]

_STRONG_WORDS = frozenset(
    {"password", "passwd", "passphrase", "passcode", "cvv", "cvv2", "cvc", "ssn", "otp", "totp", "iban"}
)
_STRONG_PHRASES = (
    "api_key",
    "apikey",
    "private_key",
    "secret_key",
    "access_key",
    "client_secret",
    "card_number",
    "credit_card",
    "debit_card",
    "account_number",
    "routing_number",
    "social_security",
    "seed_phrase",
    "recovery_phrase",
    "security_answer",
    "pin_number",
)
_ABOUT_THE_SECRET = frozenset({"manager", "app", "policy", "length", "strength", "rotation", "reset"})
_SECRET_HEADS = frozenset({"secret", "secrets", "token", "tokens", "pin", "pins"})
_SECRET_CODE_QUALIFIERS = frozenset(
    {
        "security",
        "access",
        "verification",
        "verify",
        "otp",
        "auth",
        "authentication",
        "authorization",
        "login",
        "backup",
        "recovery",
        "door",
        "alarm",
        "gate",
        "safe",
        "lock",
        "unlock",
        "garage",
        "entry",
        "2fa",
        "mfa",
        "sms",
        "pass",
        "secret",
        "bank",
        "atm",
    }
)
_POSTAL_PIN = re.compile(r"[1-9][0-9]{2}\s?[0-9]{3}")

_SECRET_VALUE = (
    re.compile(r"\b(?:sk|pk|rk)[-_](?:live_|test_)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\bbearer\s+[A-Za-z0-9._~+/-]{20,}", re.IGNORECASE),
    re.compile(
        r"\b(?:password|passcode|passphrase|pin|cvv|api key|security code)\s*(?:is|:|=)\s*\S+", re.IGNORECASE
    ),
)
_CARD = re.compile(r"(?:\d[ -]?){13,19}")
_RANDOM_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _random_looking(token: str) -> bool:
    """Mixed case and digits in one 32+ character run: a key or a hash, not a word or a number."""
    return (
        any(c.isupper() for c in token)
        and any(c.islower() for c in token)
        and sum(c.isdigit() for c in token) >= 4
    )


def value_looks_secret(value: str) -> bool:
    """Rule 1: the value's shape alone says secret."""
    if any(p.search(value) for p in _SECRET_VALUE):
        return True
    if any(_random_looking(m.group()) for m in _RANDOM_TOKEN.finditer(value)):
        return True
    for match in _CARD.finditer(value):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return True
    return False


def key_names_secret(key: str, value: str) -> bool:
    """Rules 2 to 4: the (normalised, snake_case) key says it holds a secret, read with its value."""
    words = [w for w in key.split("_") if w]
    if not words:
        return False
    head = words[-1]
    joined = "_".join(words)
    if words[-2:] == ["pin", "code"] or head == "pincode":
        return not _POSTAL_PIN.fullmatch(value.strip())
    if head in _ABOUT_THE_SECRET and len(words) > 1:
        return False
    if _STRONG_WORDS & set(words) or any(p in joined for p in _STRONG_PHRASES):
        return True
    if head in _SECRET_HEADS:
        return True
    if head in ("code", "codes"):
        return bool(_SECRET_CODE_QUALIFIERS & set(words[:-1]))
    return False


def looks_secret(key: str, value: str) -> bool:
    """True for things long-term memory must never hold (seed 000): card numbers, passwords, keys."""
    return key_names_secret(key, value) or value_looks_secret(value)
