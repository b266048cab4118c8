"""The workload: CRs created, changed (a spec change: a new generation) and deleted all
along, around a target population, through the admin client (never through a replica's
forwarder: a stall is the operator's fault, not the workload's).

Names are never reused (`s-00001`, ...), so that a CR's runs are told apart by name as
well as by uid. Only CRs that carry the operator's finalizer are deleted: a CR deleted
before its first reconcile has no finalizer run to check. Every call is retried while
the API server is away; a create whose answer was lost is looked up by name.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from .cluster import NAMESPACE
from .project import FINALIZER, GROUP, PLURAL, VERSION

RETRY_FOR = 120.0
"""How long one operation is retried while the API server does not answer."""


@dataclass
class Op:
    """One workload operation on one CR, for the timeline."""

    at: float
    op: str
    name: str
    detail: str = ""


@dataclass
class Population:
    """What the workload did: the CRs it created (name -> uid), deleted, and every op."""

    uids: dict[str, str] = field(default_factory=dict)
    deleted: dict[str, tuple[str, float]] = field(default_factory=dict)  # name -> uid, when
    ops: list[Op] = field(default_factory=list)
    creates: int = 0
    updates: int = 0
    deletes: int = 0
    failed: int = 0

    def alive(self) -> list[str]:
        return [name for name in self.uids if name not in self.deleted]


class Workload:
    def __init__(
        self,
        make_client: Callable[[], client.ApiClient],
        *,
        target: int,
        rate: float,
        seed: int,
        on_event: Callable[[str, str], None],
    ) -> None:
        self._make_client = make_client
        self._local = threading.local()
        self.target = target
        self.rate = rate
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._on_event = on_event
        self._lock = threading.Lock()
        self._counter = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._deleting: set[str] = set()
        self.population = Population()

    # -- plumbing ---------------------------------------------------------------------

    @property
    def _api(self) -> client.CustomObjectsApi:
        api = getattr(self._local, "api", None)
        if api is None:
            api = self._local.api = client.CustomObjectsApi(self._make_client())
        return api

    def _random(self) -> float:
        with self._rng_lock:
            return self._rng.random()

    def _alive(self) -> list[str]:
        with self._lock:
            return self.population.alive()

    def _deletable(self) -> list[str]:
        """Alive and not being deleted by another thread."""
        with self._lock:
            return [name for name in self.population.alive() if name not in self._deleting]

    def _choice(self, items: list[str]) -> str:
        with self._rng_lock:
            return self._rng.choice(items)

    def _record(self, op: str, name: str, detail: str = "") -> None:
        with self._lock:
            self.population.ops.append(Op(time.time(), op, name, detail))

    def _retrying(self, call: Callable[[], Any], *, ok_statuses: tuple[int, ...] = ()) -> Any:
        """`call()` until it answers; an ApiException whose status is in `ok_statuses` is
        returned rather than retried; other 4xx raise."""
        deadline = time.monotonic() + RETRY_FOR
        while True:
            try:
                return call()
            except ApiException as err:
                if err.status in ok_statuses:
                    return err
                if err.status and 400 <= err.status < 500 and err.status != 429:
                    raise
                failure: Exception = err
            except Exception as err:  # connection refused or reset: the API server is away
                failure = err
            if time.monotonic() > deadline or self._stop.is_set():
                raise TimeoutError(f"no answer for {RETRY_FOR:.0f} s: {failure}")
            time.sleep(0.5)

    def _spec(self) -> dict[str, Any]:
        draw = self._random()
        return {"work": 0 if draw < 0.7 else 1 if draw < 0.9 else 2}

    # -- operations ---------------------------------------------------------------------

    def create(self) -> str | None:
        with self._lock:
            self._counter += 1
            name = f"s-{self._counter:05d}"
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Soak",
            "metadata": {"name": name},
            "spec": {**self._spec(), "rev": 0},
        }
        api = self._api
        try:
            answer = self._retrying(
                lambda: api.create_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, PLURAL, body
                ),
                ok_statuses=(409,),
            )
            if isinstance(answer, ApiException):  # an earlier attempt went through
                answer = self._retrying(
                    lambda: api.get_namespaced_custom_object(
                        GROUP, VERSION, NAMESPACE, PLURAL, name
                    )
                )
        except Exception as err:
            with self._lock:
                self.population.failed += 1
            self._record("create-failed", name, str(err)[:200])
            return None
        with self._lock:
            self.population.uids[name] = answer["metadata"]["uid"]
            self.population.creates += 1
        self._record("create", name, f"uid {answer['metadata']['uid']}")
        return name

    def update(self) -> None:
        alive = self._alive()
        if not alive:
            return
        name = self._choice(alive)
        with self._lock:
            self._counter += 1
            rev = self._counter
        patch = {"spec": {**self._spec(), "rev": rev}}
        api = self._api
        try:
            answer = self._retrying(
                lambda: api.patch_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, PLURAL, name, patch
                ),
                ok_statuses=(404,),
            )
        except Exception as err:
            self.population.failed += 1
            self._record("update-failed", name, str(err)[:200])
            return
        if isinstance(answer, ApiException):
            self._record("update-gone", name)
            return
        with self._lock:
            self.population.updates += 1
        self._record("update", name, f"generation {answer['metadata'].get('generation')}")

    def delete(self) -> None:
        api = self._api
        for _ in range(5):
            alive = self._deletable()
            if not alive:
                return
            name = self._choice(alive)
            with self._lock:
                if name in self._deleting:
                    continue
                self._deleting.add(name)
            try:
                if self._delete(api, name):
                    return
            finally:
                with self._lock:
                    self._deleting.discard(name)

    def _delete(self, api: client.CustomObjectsApi, name: str) -> bool:
        """Delete `name` when it carries the finalizer; whether this was done (or tried
        and given up: no other CR is tried then)."""
        try:
            current = self._retrying(
                functools.partial(
                    api.get_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL, name
                )
            )
        except Exception as err:
            self._record("delete-failed", name, str(err)[:200])
            return True
        meta = current["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []) or meta.get("deletionTimestamp"):
            return False  # not reconciled yet: no finalizer run to check
        uid = meta["uid"]
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        try:
            self._retrying(
                functools.partial(
                    api.delete_namespaced_custom_object,
                    *(GROUP, VERSION, NAMESPACE, PLURAL, name),
                    body=options,
                ),
                ok_statuses=(404,),
            )
        except Exception as err:
            self.population.failed += 1
            self._record("delete-failed", name, str(err)[:200])
            return True
        with self._lock:
            self.population.deleted[name] = (uid, time.time())
            self.population.deletes += 1
        self._record("delete", name, f"uid {uid}")
        return True

    def trim(self, *, workers: int = 4) -> int:
        """Delete CRs until the population is back at the target (a burst late in the
        chaos window leaves more): the end is then measured with as many CRs as the
        baseline was, since a replica's memory grows with the objects it watches. How
        many were deleted."""
        surplus = len(self._alive()) - self.target
        if surplus <= 0:
            return 0
        before = self.population.deletes
        self._stop.clear()  # retried while the API server answers slowly
        try:
            for _round in range(3):  # a delete finds no CR with the finalizer in 5 draws
                surplus = len(self._alive()) - self.target
                if surplus <= 0:
                    break
                with ThreadPoolExecutor(workers, thread_name_prefix="soak-trim") as pool:
                    list(pool.map(lambda _index: self.delete(), range(surplus)))
        finally:
            self._stop.set()
        trimmed = self.population.deletes - before
        self._on_event("workload", f"trimmed: {trimmed} CRs deleted, {len(self._alive())} left")
        return trimmed

    def create_many(self, count: int, *, workers: int = 4) -> int:
        """Create `count` CRs as fast as `workers` threads can; how many were created."""
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="soak-create") as pool:
            made = list(pool.map(lambda _index: self.create(), range(count)))
        return sum(1 for name in made if name)

    # -- the continuous workload ----------------------------------------------------

    def step(self) -> None:
        """One operation, chosen to keep the population around the target."""
        alive = len(self._alive())
        draw = self._random()
        if alive < self.target * 0.95:
            (self.create if draw < 0.8 else self.update)()
        elif alive > self.target * 1.05:
            (self.delete if draw < 0.7 else self.update)()
        elif draw < 0.6:
            self.update()
        elif draw < 0.8:
            self.create()
        else:
            self.delete()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="soak-workload", daemon=True)
        self._thread.start()
        self._on_event("workload", f"started: {self.rate:g} operations/s around {self.target} CRs")

    def _loop(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.step()
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        p = self.population
        self._on_event(
            "workload",
            f"stopped: {p.creates} creates, {p.updates} updates, {p.deletes} deletes, "
            f"{p.failed} given up",
        )
