"""Time to mask one megabyte of text, the worst case a log line or a failure message brings.

`runner.util.redact` runs on the event loop (every log line, every condition and Event
message), so its cost on one large message is the time every controller, the API proxy
and Lease renewal wait. Prints, per input, the best of `--repeat` timings of
`redact_text` on the whole megabyte and of `redact_message` (capped first, as the
runtime calls it) in milliseconds.

Usage: .venv/bin/python bench/redact.py [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.util.redact import LOG_LIMIT, MESSAGE_LIMIT, redact_message, redact_text  # noqa: E402

SIZE = 1_000_000
TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VydmljZWFjY291bnQ.Zm9vYmFy"


def _api_error() -> str:
    """A Status error of an admission webhook that lists every bad field."""
    fields = "; ".join(f"spec.items[{i}].token.value: must be a.b.c" for i in range(40_000))
    body = {"kind": "Status", "status": "Failure", "message": fields, "reason": "Invalid"}
    return json.dumps(body)[:SIZE]


def _quoted_payload() -> str:
    """A webhook's error quoting a base64url value: one word a megabyte long."""
    payload = base64.urlsafe_b64encode(bytes(range(256)) * 2930).decode().rstrip("=")
    body = {"kind": "Status", "message": f"spec.payload: invalid signature: {payload}"}
    return json.dumps(body)[:SIZE]


def _task_output() -> str:
    """A failed task's output: log lines, some of them with credentials."""
    lines = []
    size = 0
    while size < SIZE:
        if len(lines) % 50 == 0:
            line = f"request {len(lines)}: Authorization: Bearer {TOKEN} password={TOKEN}"
        else:
            line = f"request {len(lines)}: GET /api/v1/namespaces/default/configmaps 200 OK"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:SIZE]


INPUTS: dict[str, Callable[[], str]] = {
    "task output with credentials": _task_output,
    "API error JSON": _api_error,
    "API error quoting a payload": _quoted_payload,
    '"a." repeated': lambda: "a." * (SIZE // 2),
    '"=" repeated': lambda: "=" * SIZE,
    '":" repeated': lambda: ":" * SIZE,
    "quotes repeated": lambda: '"' * SIZE,
    '"token=" repeated': lambda: ("token=" * SIZE)[:SIZE],
}


def _best_ms(function: Callable[[str], str], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rows = []
    for name, build in INPUTS.items():
        text = build()
        rows.append(
            {
                "input": name,
                "chars": len(text),
                "redact_text_ms": round(_best_ms(redact_text, text, args.repeat), 1),
                "condition_ms": round(
                    _best_ms(lambda t: redact_message(t, MESSAGE_LIMIT), text, args.repeat), 1
                ),
                "log_line_ms": round(
                    _best_ms(lambda t: redact_message(t, LOG_LIMIT), text, args.repeat), 1
                ),
            }
        )
    print(f"{'input':<30} {'chars':>9} {'whole (ms)':>11} {'condition':>10} {'log line':>9}")
    for row in rows:
        print(
            f"{row['input']:<30} {row['chars']:>9} {row['redact_text_ms']:>11} "
            f"{row['condition_ms']:>10} {row['log_line_ms']:>9}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
