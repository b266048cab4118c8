"""The messages between the operator and a warm runner process: length-prefixed JSON.

Each frame is a 4-byte big-endian length and that many bytes of JSON (one object).

    operator -> process   {"vars": {...}}            one request's extra-vars
    process -> operator   {"loaded": {"warm", "why"}}                   once started
                          {"events": [...], "loaded"?} | {"cold": true, "loaded"?}
                          | {"error": "..."}            the answer to each request

`loaded` is sent again with an answer when the play was reloaded (its files changed).
"""

from __future__ import annotations

import datetime
import json
import struct
from typing import Any

__all__ = ["HEADER", "MAX_FRAME", "decode", "encode", "length"]

HEADER = 4
MAX_FRAME = 256 * 1024 * 1024


def encode(message: dict[str, Any]) -> bytes:
    """A frame; `TypeError` for values JSON cannot hold (as ansible-runner's event
    encoder: dates become ISO text, Ansible's vault values their ciphertext)."""
    body = json.dumps(message, default=_default, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def length(header: bytes) -> int:
    (size,) = struct.unpack(">I", header)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes is larger than {MAX_FRAME}")
    return int(size)


def decode(body: bytes) -> dict[str, Any]:
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ValueError("a frame is not a JSON object")
    return message


def _default(value: Any) -> Any:
    if getattr(value, "yaml_tag", None) == "!vault":
        cipher = value._ciphertext
        return {"__ansible_vault": cipher.decode() if isinstance(cipher, bytes) else cipher}
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
