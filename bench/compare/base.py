"""What every part of the comparison shares: the sample operator's coordinates, paths, `log`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

GROUP, VERSION, PLURAL, KIND = "cache.example.com", "v1alpha1", "memcacheds", "Memcached"
GVK_LABEL = f"{GROUP}/{VERSION}, Kind={KIND}"
CRD_FILE = REPO / "config" / "crd" / "bases" / "cache.example.com_memcacheds.yaml"
VENV = REPO / ".venv"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
