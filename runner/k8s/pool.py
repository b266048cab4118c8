"""The API connection pool: the connection released last is the one reused first.

aiohttp (3.10 and later) hands idle connections out oldest first. An operator that keeps
making a request every second or so (a sharded replica renews its member Lease and
checks the ring every 2 s) then cycles through every connection its busiest moment
opened, each reused well within the 15 s after which an idle one is closed: the pool
never shrinks, and each replica keeps tens of TLS connections (and the API server a
goroutine and buffers for each) open for good after one burst of runs. Found by the
chaos soak (docs/soak.md): a sharded replica held 22 API connections at rest, 12 after
its first quiet period.

Handing out the newest first, steady traffic keeps one connection busy and the rest of
a burst's connections idle out.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import aiohttp


class NewestFirstConnector(aiohttp.TCPConnector):
    """A TCPConnector whose idle connections are reused newest first."""

    def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
        super()._release(key, protocol, should_close=should_close)
        # aiohttp keeps each key's idle connections as (protocol, released at), taken
        # from the left: the one just released goes there. (Versions that keep a list
        # take from the end already; anything else is left as aiohttp has it.)
        idle = getattr(self, "_conns", {}).get(key)
        if isinstance(idle, deque) and len(idle) > 1 and idle[-1][0] is protocol:
            idle.rotate(1)
