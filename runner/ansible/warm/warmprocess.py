"""A warm runner process: `python -m runner.ansible.warm.warmprocess --playbook P --inventory H`.

Started by `pool.py` in the environment and working directory a full run of the same
webhook would have, reading requests on stdin and answering on stdout (`frames.py`);
Ansible's own output (the display) goes to /dev/null. It loads the play once
(`warmrole.WarmPlay`), says whether it runs warm, then per request: reloads the play if
one of its files changed, and runs the tasks with the request's extra-vars (or answers
`cold`: the operator then runs the request as a full run). It exits when stdin closes or
the operator dies (the kernel sends it SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import signal
import sys
import traceback
from typing import Any, BinaryIO

from runner.ansible.warm import frames

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.ansible.warm.warmprocess")
    parser.add_argument("--playbook", required=True)
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--verbosity", type=int, default=0)
    parser.add_argument("--scratch", required=True, help="a directory for request files")
    args = parser.parse_args(argv)
    _die_with_parent()
    requests, answers = _protocol_streams()
    try:
        from runner.ansible.hooks import warmrole

        warmrole.prepare(args.playbook, args.inventory, args.verbosity)
        play = warmrole.WarmPlay(args.playbook)
        decision = play.load()
    except Exception:
        _send(answers, {"error": traceback.format_exc(limit=5)})
        return 1
    gc.collect()
    gc.freeze()  # what was loaded stays: the collector need not walk it per request
    _send(answers, {"loaded": {"warm": decision.warm, "why": decision.why}})
    vars_file = os.path.join(args.scratch, f"extravars-{os.getpid()}.json")
    while True:
        request = _receive(requests)
        if request is None:
            return 0
        _send(answers, _answer(play, request, vars_file))


def _answer(play: Any, request: dict[str, Any], vars_file: str) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    try:
        if play.changed():
            gc.unfreeze()  # the old play becomes garbage, cycles included
            decision = play.load()
            gc.collect()
            gc.freeze()
            answer["loaded"] = {"warm": decision.warm, "why": decision.why}
        if not play.decision.warm:
            answer["cold"] = True
            return answer
        with open(vars_file, "w", encoding="utf-8") as out:
            json.dump(request.get("vars") or {}, out, sort_keys=True)
        answer["events"] = play.run(vars_file)
        frames.encode(answer)  # values JSON cannot hold fail here, as an error
    except Exception as exc:
        return {**{k: v for k, v in answer.items() if k == "loaded"}, "error": _error(exc)}
    return answer


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """stdin and stdout for the frames; fds 0-2 then point at /dev/null, so that
    nothing Ansible prints can reach the frames."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return requests, answers


def _send(stream: BinaryIO, message: dict[str, Any]) -> None:
    try:
        data = frames.encode(message)
    except (TypeError, ValueError) as exc:
        data = frames.encode({"error": f"the answer cannot be encoded: {exc}"})
    stream.write(data)


def _receive(stream: BinaryIO) -> dict[str, Any] | None:
    header = _read(stream, frames.HEADER)
    if header is None:
        return None
    body = _read(stream, frames.length(header))
    return frames.decode(body) if body is not None else None


def _read(stream: BinaryIO, size: int) -> bytes | None:
    chunks, left = [], size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


if __name__ == "__main__":
    sys.exit(main())
