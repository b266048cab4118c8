"""Sharding across operator replicas (`--sharding`), with real processes and API server.

One flow, as the replicas of a Deployment live it: two replicas share the CRs; a third
joins and about a third of the keys move to it, each after a drain; one replica is
killed with -9 and its keys are served by the others once its Lease expires; CRs being
finalized while they move are finalized once; the ring shrinks to one replica, which
ends up with every key. Throughout, the replicas' run records prove that no CR ever had
two runs in flight at once on different replicas.

`ANSIBLE_OPERATOR_SHARDING_CRS` sets how many CRs (150 by default, so that `make test`
stays short on two shared cores; the issue's 3,000 run the same test with it set).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.kube import wait_for
from support.operator import NO_FACTS, OperatorProcess, crd, install_crd, write_project

from runner.sharding.ring import handoff_of, key_of, lease_name, owner_of, shard_label
from runner.structs import GVK, NamespacedName

GROUP = "sharding.test.example.com"
KIND = "Piece"
FINAL = "Final"
RING = "sharding-test"
LABEL = shard_label(RING)
COUNT = int(os.environ.get("ANSIBLE_OPERATOR_SHARDING_CRS", "150"))
FINALIZING = 16
# Waits that grow with the number of CRs: the defaults fit 150 on a loaded machine.
SCALE = max(1.0, COUNT / 500)
LEASE = 30.0  # a loaded machine (CI: three workers on two cores) answers renewals late
RENEW_DEADLINE = 25.0

NOOP = """
- name: Nothing to do
  ansible.builtin.debug:
    msg: "{{ ansible_operator_meta.name }}"
"""

SLOW_FINALIZER = """
- name: Take a while
  ansible.builtin.pause:
    seconds: "{{ pause | int }}"
- name: Record the finalizer run
  ansible.builtin.shell: "echo once >> {{ record }}/{{ ansible_operator_meta.name }}"
"""

RUN_LINE = re.compile(r"^reconcile (?P<kind>\w+) (?P<key>\S+): (?P<what>.*)$")
MEMBER = re.compile(r"joining the ring \S+ as member ([a-z0-9-]+)")
HANDOFF_LINE = re.compile(r"^handed \w+ (?P<key>\S+) off to ")
DRAINING_LINE = re.compile(r"^draining \w+ (?P<key>\S+): waiting for its run to finish$")


@pytest.fixture(scope="module")
def pieces(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind=KIND))


@pytest.fixture(scope="module")
def finals(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind=FINAL))


def _runs(log: str) -> dict[tuple[str, str], list[tuple[datetime, datetime | None]]]:
    """(kind, namespace/name) -> (started, ended) of every run in an operator's JSON log;
    ended is None for a run that never logged its end (its operator was killed)."""
    found: dict[tuple[str, str], list[tuple[datetime, datetime | None]]] = {}
    open_runs: dict[tuple[str, str], datetime] = {}
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        match = RUN_LINE.match(str(entry.get("msg", "")))
        if match is None:
            continue
        key = (match["kind"], match["key"])
        at = datetime.fromisoformat(entry["ts"])
        if match["what"] == "running Ansible":
            open_runs[key] = at
        elif key in open_runs:
            found.setdefault(key, []).append((open_runs.pop(key), at))
    for key, started in open_runs.items():
        found.setdefault(key, []).append((started, None))
    return found


def _assert_no_overlaps(logs: dict[str, str], killed_at: dict[str, datetime]) -> None:
    """No CR had runs in flight on two replicas at once (`logs`: replica -> its log; a
    run a kill cut short ends when its replica was killed)."""
    runs = {name: _runs(log) for name, log in logs.items()}
    overlaps = []
    for key in {key for found in runs.values() for key in found}:
        spans = []
        for name, found in runs.items():
            for started, ended in found.get(key, []):
                end = ended or killed_at.get(name) or datetime.now(UTC)
                spans.append((started, end, name))
        for (s1, e1, n1), (s2, e2, n2) in itertools.combinations(spans, 2):
            if n1 != n2 and s1 < e2 and s2 < e1:
                overlaps.append((key, n1, s1, e1, n2, s2, e2))
    total = sum(len(v) for found in runs.values() for v in found.values())
    print(f"{total} runs on {len(runs)} replicas, {len(overlaps)} overlapping")
    assert not overlaps, overlaps[:5]


def _logged(log: str, pattern: re.Pattern[str]) -> dict[str, datetime]:
    """namespace/name (the pattern's `key`) -> when the replica last logged a line
    matching `pattern` for it."""
    found = {}
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        match = pattern.match(str(entry.get("msg", "")))
        if match is not None:
            found[match["key"]] = datetime.fromisoformat(entry["ts"])
    return found


def _owners(resource: Any, namespace: str) -> dict[str, str]:
    items = resource.get(namespace=namespace).to_dict()["items"]
    return {
        item["metadata"]["name"]: (item["metadata"].get("labels") or {}).get(LABEL, "")
        for item in items
    }


def _successful(resource: Any, namespace: str) -> int:
    items = resource.get(namespace=namespace).to_dict()["items"]
    return sum(
        any(
            c.get("type") == "Successful" and c.get("status") == "True"
            for c in (i.get("status") or {}).get("conditions") or []
        )
        for i in items
    )


class Replicas:
    """The test's operator processes, by the test's name for each, and their members."""

    def __init__(
        self, project: Path, *, kubeconfig: Path, args: list[str], root: Path, namespace: str
    ) -> None:
        self.project, self.kubeconfig, self.args = project, kubeconfig, args
        self.root, self.namespace = root, namespace
        self.procs: dict[str, OperatorProcess] = {}
        self.members: dict[str, str] = {}  # the test's name -> member name
        self.stopped: set[str] = set()  # killed or stopped by the test

    def start(self, name: str, *, until_started: bool = True) -> str:
        """Start replica `name`; return its member name once it has joined the ring (and,
        with `until_started`, once its controllers run)."""
        log = self.root / name / "op.log"
        log.parent.mkdir()
        proc = self.procs[name] = OperatorProcess(
            self.project,
            kubeconfig=self.kubeconfig,
            log=log,
            args=self.args,
            env={"WATCH_NAMESPACE": self.namespace, **NO_FACTS},  # the roles use none
        )
        found = wait_for(lambda: MEMBER.search(proc.log()), timeout=120, message=f"{name} joins")
        self.members[name] = found.group(1)
        if until_started:
            wait_for(lambda: "started " in proc.log(), timeout=120, message=f"{name} runs")
        return self.members[name]

    def __getitem__(self, name: str) -> OperatorProcess:
        return self.procs[name]

    def kill(self, name: str) -> None:
        """kill -9 the replica: the pod, zygote and all."""
        self.stopped.add(name)
        os.killpg(self.procs[name].process.pid, signal.SIGKILL)
        self.procs[name].process.wait()

    def stop(self, name: str) -> int:
        self.stopped.add(name)
        return self.procs[name].stop(timeout=60)

    def assert_running(self) -> None:
        """Fail at once, with its log's end, when a replica the test did not stop exited
        (one that cannot renew its Lease in time exits, by design)."""
        for name, proc in self.procs.items():
            if name not in self.stopped and not proc.running():
                tail = "\n".join(proc.log().splitlines()[-15:])
                raise AssertionError(f"replica {name} exited unasked:\n{tail}")

    def logs(self) -> dict[str, str]:
        return {name: proc.log() for name, proc in self.procs.items()}

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop(timeout=60)


@pytest.mark.timeout(1800 * SCALE)
def test_replicas_share_move_survive_and_shrink(
    pieces: Any, finals: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    record = tmp_path / "finalizer-runs"
    record.mkdir()
    project = write_project(
        tmp_path / "project",
        watches=[
            {"group": GROUP, "version": "v1alpha1", "kind": KIND, "role": "noop"},
            {
                "group": GROUP,
                "version": "v1alpha1",
                "kind": FINAL,
                "role": "noop",
                "finalizer": {"name": f"{GROUP}/finalizer", "role": "slow"},
            },
        ],
        roles={"noop": NOOP, "slow": SLOW_FINALIZER},
    )
    args = [
        "--sharding",
        "--sharding-ring",
        RING,
        "--sharding-namespace",
        namespace,
        "--sharding-lease-duration",
        f"{LEASE:g}s",
        "--sharding-renew-deadline",
        f"{RENEW_DEADLINE:g}s",
        "--sharding-retry-period",
        "1s",
        "--graceful-shutdown-timeout",
        "5s",
        "--max-concurrent-reconciles",
        "16",
        "--ansible-backend",
        "fast",
        "--zap-encoder",
        "json",
    ]
    replicas = Replicas(
        project, kubeconfig=kubeconfig, args=args, root=tmp_path, namespace=namespace
    )
    members = replicas.members
    start = replicas.start
    killed_at: dict[str, datetime] = {}

    def settled(live: list[str]) -> dict[str, str]:
        """Wait until every Piece is labelled with its rendezvous owner among `live`."""
        gvk = GVK(GROUP, "v1alpha1", KIND)

        def done() -> dict[str, str] | None:
            replicas.assert_running()
            owners = _owners(pieces, namespace)
            expected = {
                name: owner_of(key_of(gvk, NamespacedName(namespace, name)), live)
                for name in owners
            }
            return owners if owners == expected and len(owners) == COUNT else None

        return wait_for(done, timeout=600 * SCALE, interval=1, message=f"keys on {live}")

    try:
        a, b = start("a"), start("b")
        began = time.monotonic()
        for index in range(COUNT):
            pieces.create(
                body={
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": KIND,
                    "metadata": {"name": f"p-{index:05d}"},
                    "spec": {"index": index},
                },
                namespace=namespace,
            )
        wait_for(
            lambda: replicas.assert_running() or _successful(pieces, namespace) == COUNT,
            timeout=900 * SCALE,
            interval=2,
            message=f"all {COUNT} Successful",
        )
        print(f"{COUNT} CRs Successful on 2 replicas in {time.monotonic() - began:.1f} s")
        owners = settled([a, b])
        print("owners on 2 replicas:", Counter(owners.values()))
        assert set(owners.values()) == {a, b}

        # A third replica joins: about a third of the keys move to it, after a drain.
        joined = time.monotonic()
        c = start("c")
        owners = settled([a, b, c])
        shares = Counter(owners.values())
        print(f"owners on 3 replicas after {time.monotonic() - joined:.1f} s:", shares)
        # About a third: within five standard deviations of a fair three-way split.
        assert abs(shares[c] - COUNT / 3) <= 5 * math.sqrt(COUNT * 2 / 9), shares
        handed = sum(replicas[n].log().count(f"off to {c}") for n in ("a", "b"))
        assert handed == shares[c], f"{handed} hand-offs logged, {shares[c]} keys on c"

        # kill -9 one replica: its keys go to the others once its Lease has expired.
        victim_keys = [name for name, owner in owners.items() if owner == a]
        killed_at["a"] = datetime.now(UTC)
        killed = time.monotonic()
        replicas.kill("a")
        owners = settled([b, c])
        print(
            f"{a}'s {len(victim_keys)} keys taken over {time.monotonic() - killed:.1f} s "
            f"after kill -9 (Lease {LEASE:g} s)"
        )

        def victims_served() -> bool:
            runs = {members[n]: _runs(replicas[n].log()) for n in ("b", "c")}
            return all(
                any(
                    ended is not None and ended > killed_at["a"]
                    for _, ended in runs[owners[name]].get((KIND, f"{namespace}/{name}"), [])
                )
                for name in victim_keys
            )

        wait_for(
            victims_served,
            timeout=300 * SCALE,
            interval=1,
            message="the victim's keys reconciled by their new owners",
        )
        print(f"... and reconciled {time.monotonic() - killed:.1f} s after the kill")

        # Finalizers in flight while a replica joins: each runs exactly once.
        for index in range(FINALIZING):
            finals.create(
                body={
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": FINAL,
                    "metadata": {"name": f"f-{index:02d}"},
                    "spec": {"pause": 40, "record": str(record)},
                },
                namespace=namespace,
            )
        wait_for(
            lambda: _successful(finals, namespace) == FINALIZING,
            timeout=300,
            message="the finalizer CRs Successful",
        )
        for index in range(FINALIZING):
            finals.delete(name=f"f-{index:02d}", namespace=namespace)
        d = start("d")
        wait_for(
            lambda: not finals.get(namespace=namespace).to_dict()["items"],
            timeout=600,
            interval=1,
            message="every finalizer CR finalized and gone",
        )
        counts = {p.name: len(p.read_text().split()) for p in record.iterdir()}
        print("finalizer runs:", counts)
        assert len(counts) == FINALIZING and set(counts.values()) == {1}, counts
        drained = [
            line
            for n in ("b", "c")
            for line in replicas[n].log().splitlines()
            if f"draining {FINAL} " in line
        ]
        print("finalizer runs in flight when their key was to move:", *drained, sep="\n")
        assert drained, "no key of a finalizer in flight was to move (d took none)"

        # Scale back to one replica: every key ends up on it.
        owners = settled([b, c, d])
        for name in ("c", "d"):
            assert replicas.stop(name) == 0
        owners = settled([b])
        assert set(owners.values()) == {b}
    finally:
        replicas.stop_all()

    # No CR ever had two runs in flight on different replicas.
    _assert_no_overlaps(replicas.logs(), killed_at)


SLOW = """
- name: Take a while
  ansible.builtin.pause:
    seconds: "{{ pause | int }}"
"""
HANDOFF_KEYS = 12
PAUSE = 6
HANDOFF_LEASE = 30.0


@pytest.mark.timeout(600)
def test_sigterm_hands_every_key_off_before_the_replica_exits(
    pieces: Any, api_client: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    """A replica stopped with SIGTERM (a rolling update, a scale-down) while its runs are
    in flight: it starts no new run, hands each key to its new owner as soon as the key
    has no run in flight, deletes its Lease and exits 0, long before its Lease would have
    expired; the others serve its keys at once, never two runs of a key at a time."""
    project = write_project(
        tmp_path / "project",
        watches=[{"group": GROUP, "version": "v1alpha1", "kind": KIND, "role": "slow"}],
        roles={"slow": SLOW},
    )
    args = [
        "--sharding",
        f"--sharding-ring={RING}",
        f"--sharding-namespace={namespace}",
        f"--sharding-lease-duration={HANDOFF_LEASE:g}s",
        f"--sharding-renew-deadline={RENEW_DEADLINE:g}s",
        "--sharding-retry-period=1s",
        "--max-concurrent-reconciles=2",
        "--ansible-backend=fast",
        "--zap-encoder=json",
    ]
    leases = client.CoordinationV1Api(api_client)
    replicas = Replicas(
        project, kubeconfig=kubeconfig, args=args, root=tmp_path, namespace=namespace
    )
    members = replicas.members

    try:
        for name in ("a", "b", "c"):
            replicas.start(name, until_started=False)
        wait_for(
            lambda: all("started " in log for log in replicas.logs().values()),
            timeout=120,
            message="the replicas' controllers started",
        )
        live = sorted(members.values())
        wait_for(
            lambda: all(
                f"ring {RING}: members {', '.join(live)} (" in proc.log()
                for proc in replicas.procs.values()
            ),
            timeout=60,
            message="every replica sees all three",
        )
        # Names the victim owns among the three: it gets every CR of the test.
        gvk = GVK(GROUP, "v1alpha1", KIND)
        victim = members["a"]
        candidates = (f"h-{index:04d}" for index in itertools.count())
        wanted = list(
            itertools.islice(
                (
                    name
                    for name in candidates
                    if owner_of(key_of(gvk, NamespacedName(namespace, name)), live) == victim
                ),
                HANDOFF_KEYS,
            )
        )
        for name in wanted:
            pieces.create(
                body={
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": KIND,
                    "metadata": {"name": name},
                    "spec": {"pause": PAUSE},
                },
                namespace=namespace,
            )

        wait_for(
            lambda: _owners(pieces, namespace) == dict.fromkeys(wanted, victim),
            timeout=180,
            message="the victim owns every key",
        )

        def run_just_started() -> bool:
            """A run in flight that began less than a second ago (it lasts PAUSE s more)."""
            runs = _runs(replicas["a"].log())
            now = datetime.now(UTC)
            return any(
                ended is None and (now - started).total_seconds() < 1
                for spans in runs.values()
                for started, ended in spans
            )

        wait_for(run_just_started, timeout=180, message="a run of the victim just started")
        signalled_at = datetime.now(UTC)
        signalled = time.monotonic()
        replicas["a"].process.send_signal(signal.SIGTERM)
        code = replicas["a"].process.wait(timeout=120)
        exited = time.monotonic() - signalled
        at_exit = _owners(pieces, namespace)
        lease_left = [
            lease.metadata.name
            for lease in leases.list_namespaced_lease(namespace).items
            if lease.metadata.name == lease_name(RING, victim)
        ]
        print(f"victim exited {exited:.1f} s after SIGTERM with {code}; owners then:", at_exit)

        # Keys whose run ended on the victim keep their schedule (the next run due after
        # the watch's reconcilePeriod); the others have a run to do on their new owners.
        ran = {key[1] for key, spans in _runs(replicas["a"].log()).items() if spans}
        to_run = [name for name in wanted if f"{namespace}/{name}" not in ran]

        def served() -> bool:
            runs = {members[n]: _runs(replicas[n].log()) for n in ("b", "c")}
            owners = _owners(pieces, namespace)
            return all(
                owners[name] in runs
                and any(
                    ended is not None and ended > signalled_at
                    for _, ended in runs[owners[name]].get((KIND, f"{namespace}/{name}"), [])
                )
                for name in to_run
            )

        wait_for(served, timeout=300, interval=0.5, message="the victim's keys served")
        print(
            f"{len(to_run)} keys not run yet run by their new owners "
            f"{time.monotonic() - signalled:.1f} s after SIGTERM (Lease {HANDOFF_LEASE:g} s)"
        )
        for name in wanted:
            if name in to_run:
                continue
            obj = pieces.get(name=name, namespace=namespace).to_dict()
            handoff = handoff_of(obj, RING)
            assert handoff is not None and handoff.source == victim, obj["metadata"]
            assert handoff.due > time.time() + 3600, f"{name}: its schedule was lost"
        assert code == 0
        assert victim not in at_exit.values(), "keys still labelled with the replica that left"
        assert not lease_left, "the leaving replica's Lease is still there"
        handed = replicas["a"].log().count("off to ")
        assert handed >= len(wanted), f"{handed} hand-offs logged for {len(wanted)} keys"
        for name in ("b", "c"):
            assert "took over" not in replicas[name].log(), "a key was claimed, not handed"
        # The keys not in flight moved at once: before the run that had just started
        # ended (the old way, every key waited for the last run in flight). In flight:
        # as the replica saw it when it began to leave (it logs waiting for their runs);
        # on a busy machine a run can still start between the signal and its handling.
        spans = _runs(replicas["a"].log())
        waited = _logged(replicas["a"].log(), DRAINING_LINE)
        busy = {
            key[1]: ended
            for key, found in spans.items()
            for _, ended in found
            if key[1] in waited and (ended is None or ended > signalled_at)
        }
        last_end = max(ended for ended in busy.values() if ended is not None)
        handed_at = _logged(replicas["a"].log(), HANDOFF_LINE)
        idle = [f"{namespace}/{name}" for name in wanted if f"{namespace}/{name}" not in busy]
        print(
            f"{len(idle)} idle keys handed off within "
            f"{max((handed_at[key] - signalled_at).total_seconds() for key in idle):.2f} s of "
            f"SIGTERM; {len(busy)} in flight, handed off "
            f"{max((handed_at[key] - signalled_at).total_seconds() for key in busy):.2f} s after"
        )
        late = [key for key in idle if handed_at[key] >= last_end]
        assert idle and not late, f"idle keys handed off only after the runs ended: {late}"
    finally:
        replicas.stop_all()
    _assert_no_overlaps(replicas.logs(), {})
