"""Carries the schedule out: each fault at its time, in a thread of its own (faults
overlap), each recorded with when it began and ended and whom it hit.

What each kind does:

- `kill9` / `sigterm`: the signal to the replica's operator process only (what it
  started must go by itself); the replica is restarted like every exited one;
- `apiserver-restart` / `etcd-restart`: the component stopped, kept down, started again
  (`LocalCluster.outage`, one at a time);
- `tcp-stall`: the replica's forwarder to the API server stops moving bytes, then
  resumes (held back bytes are delivered);
- `burst`: that many CRs created at once, beside the workload;
- `zygote-kill`: kill -9 of the replica's fast-backend zygote (its runs in flight die;
  a replica without one at that moment is looked at again for a while);
- `disk-full`: the replica's run-directory filesystem filled to ENOSPC, then emptied.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.ansible import proctree

from . import schedule
from .cluster import NAMESPACE, SYSTEM_NAMESPACE, SoakCluster
from .project import GROUP, PLURAL, VERSION
from .replicas import ELECTION_ID, Replica, Replicas
from .schedule import Fault
from .workload import Workload

ZYGOTE_MODULE = b"runner.ansible.fastbackend.zygoteprocess"
ZYGOTE_PATIENCE = 20.0
"""Seconds a zygote kill looks for a zygote on its target before it is skipped."""


@dataclass
class Injected:
    """A fault as it happened."""

    fault: Fault
    began: float
    ended: float | None = None
    target: str = ""
    """The replica it hit (the incarnation's id), for targeted faults."""
    outcome: str = ""
    skipped: bool = False
    struck: float | None = None
    """When it hit (a zygote kill: the kill itself, which can come well after `began`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            **self.fault.to_json(),
            "began": self.began,
            "ended": self.ended,
            "hit": self.target,
            "outcome": self.outcome,
            "skipped": self.skipped,
            "struck": self.struck,
        }


def zygotes(pid: int) -> list[int]:
    """The operator `pid`'s zygotes: its children that run the zygote module (the runs
    forked from them carry the same command line, one level further down)."""
    found = []
    for child in proctree.children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                if ZYGOTE_MODULE in handle.read().split(b"\0"):
                    found.append(child)
        except OSError:
            continue
    return found


def fill(directory: Path) -> Path:
    """Write a file into `directory` until its filesystem has no space left."""
    filler = directory / "soak-filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise
    return filler


class Injector:
    def __init__(
        self,
        faults: list[Fault],
        *,
        cluster: SoakCluster,
        replicas: Replicas,
        workload: Workload,
        sharding: bool,
        seed: int,
        on_event: Callable[[str, str], None],
    ) -> None:
        self.faults = faults
        self.cluster = cluster
        self.replicas = replicas
        self.workload = workload
        self.sharding = sharding
        self._rng = random.Random(seed * 7919 + 1)
        self._on_event = on_event
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._api: client.ApiClient | None = None
        self.injected: list[Injected] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self._opened = time.monotonic()
        thread = threading.Thread(target=self._dispatch, name="soak-faults", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _dispatch(self) -> None:
        for fault in self.faults:
            if self._stop.wait(max(0.0, self._opened + fault.at - time.monotonic())):
                return
            thread = threading.Thread(
                target=self._inject, args=(fault,), name=f"soak-{fault.kind}", daemon=True
            )
            thread.start()
            with self._lock:
                self._threads.append(thread)

    def stop(self) -> None:
        """No new fault; wait for those under way (stalls and full disks end early)."""
        self._stop.set()
        while True:
            with self._lock:
                alive = [t for t in self._threads if t.is_alive()]
            if not alive:
                return
            alive[0].join()

    def counts(self) -> Counter[str]:
        return Counter(i.fault.kind for i in self.injected if not i.skipped)

    # -- one fault --------------------------------------------------------------------

    def _inject(self, fault: Fault) -> None:
        record = Injected(fault=fault, began=time.time())
        with self._lock:
            self.injected.append(record)
        self._on_event("fault", f"{fault.describe().split(maxsplit=2)[-1]}: begins")
        try:
            record.outcome = self._do(fault, record)
        except Exception as err:  # a fault that could not be injected is reported
            record.outcome = f"error: {err}"
            record.skipped = True
        record.ended = time.time()
        where = f" on {record.target}" if record.target else ""
        self._on_event("fault", f"{fault.kind}{where}: {record.outcome}")

    def _do(self, fault: Fault, record: Injected) -> str:
        kind = fault.kind
        if kind == schedule.APISERVER:
            self.cluster.outage("kube-apiserver", fault.seconds)
            return f"down {fault.seconds:.1f} s, serving again"
        if kind == schedule.ETCD:
            self.cluster.outage("etcd", fault.seconds)
            return f"down {fault.seconds:.1f} s, started again"
        if kind == schedule.BURST:
            made = self.workload.create_many(fault.count)
            return f"{made} CRs created"
        replica = self._target(fault.target)
        if replica is None:
            record.skipped = True
            return "no replica running"
        current = replica.current()
        record.target = current.id if current else replica.name
        if kind == schedule.KILL9:
            return "killed" if replica.send(signal.SIGKILL, "kill9") else "not running"
        if kind == schedule.SIGTERM:
            return "signalled" if replica.send(signal.SIGTERM, "sigterm") else "not running"
        if kind == schedule.STALL:
            replica.forwarder.stall()
            try:
                self._stop.wait(fault.seconds)
            finally:
                replica.forwarder.resume()
            return f"stalled {fault.seconds:.1f} s"
        if kind == schedule.ZYGOTE:
            return self._kill_zygote(fault, record, replica)
        if kind == schedule.DISKFULL:
            where = replica.runner_dir_seen()
            if where is None:
                record.skipped = True
                return "no run-directory filesystem of its own"
            filler = fill(where)
            try:
                self._stop.wait(fault.seconds)
            finally:
                filler.unlink(missing_ok=True)
            return f"full {fault.seconds:.1f} s"
        raise ValueError(f"unknown fault kind {kind!r}")

    def _kill_zygote(self, fault: Fault, record: Injected, replica: Replica | None) -> str:
        """Kill -9 of the target's zygote. A replica can have none for a moment (it is
        stopping after losing its Lease, starting again, or replacing its zygote): the
        target is looked for again, each second, for up to ZYGOTE_PATIENCE seconds."""
        deadline = time.monotonic() + ZYGOTE_PATIENCE
        while True:
            current = replica.current() if replica is not None else None
            found = zygotes(current.pid) if current is not None and current.alive() else []
            if current is not None and found:
                record.target = current.id
                try:
                    record.struck = time.time()
                    os.kill(found[0], signal.SIGKILL)
                    return f"killed zygote {found[0]}"
                except ProcessLookupError:
                    pass  # it went in between: look again
            if time.monotonic() > deadline or self._stop.wait(1.0):
                record.skipped = True
                return "no zygote"
            replica = self._target(fault.target)

    def _target(self, target: str) -> Replica | None:
        """The replica a fault hits: by name, or `leader` (the Lease holder; with
        sharding, the replica owning most CRs); a random running one when that is not
        known (the API server away)."""
        running = [r for r in self.replicas if (c := r.current()) is not None and c.alive()]
        if target and target != "leader":
            return self.replicas[target]
        try:
            found = self._busiest() if self.sharding else self._leader()
        except Exception:
            found = None
        if found is not None:
            return found
        return self._rng.choice(running) if running else None

    def _client(self) -> client.ApiClient:
        if self._api is None:
            self._api = self.cluster.client()
        return self._api

    def _by_identity(self, identity: str) -> Replica | None:
        for replica in self.replicas:
            current = replica.current()
            if current is not None and current.alive() and current.oplog().identity == identity:
                return replica
        return None

    def _leader(self) -> Replica | None:
        lease = client.CoordinationV1Api(self._client()).read_namespaced_lease(
            ELECTION_ID, SYSTEM_NAMESPACE, _request_timeout=5
        )
        holder = (lease.spec.holder_identity if lease.spec else None) or ""
        return self._by_identity(holder) if holder else None

    def _busiest(self) -> Replica | None:
        items = client.CustomObjectsApi(self._client()).list_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, _request_timeout=10
        )["items"]
        owners = Counter(
            value
            for item in items
            for key, value in ((item["metadata"].get("labels") or {}).items())
            if key.startswith("shard.sharding.")
        )
        for member, _count in owners.most_common():
            found = self._by_identity(member)
            if found is not None:
                return found
        return None
