"""What a reconcile asks the controller to do with its key next: a closed set of values.

controller-runtime's reconciler returns `(Result, error)` and the controller reads the
pair through a table; here the reconcile returns one value and the table is `match`:

    Done                 the world matches the CR          forget the key's backoff
    RequeueAfter(delay)  look again after `delay` seconds  forget, then add after `delay`
    Retry(reason)        it failed; retrying may help      add rate limited (backoff)
    Terminal(reason)     retrying cannot help until the    forget; the reason is logged,
                         object changes                    recorded as an Event and counted

`Reconciler` is what a controller drives: anything with `async reconcile(key) -> Outcome`
(the Ansible operator's is `runner.operator.reconciler`; the engine's tests script one).
`outcome_of` turns the errors a reconcile may raise (`runner.errors`' tree) into these
values, so the reconciler and controller never decide it twice. Pure: no IO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, assert_never

from runner.errors import AnsibleOperatorError
from runner.k8s.apierrors import Conflict, Invalid
from runner.structs import NamespacedName


@dataclass(frozen=True)
class Done:
    """Nothing more to do until the next event for the key."""


@dataclass(frozen=True)
class RequeueAfter:
    """Reconcile again after `delay` seconds (the reconcile period, a `requeue_after`)."""

    delay: float


@dataclass(frozen=True)
class Retry:
    """The reconcile failed; run it again after the key's next backoff delay.

    `routine`: it lost a race (a 409 Conflict: somebody else wrote the object between our
    read and write); nothing is wrong, so it is logged quietly."""

    reason: str
    routine: bool = False


@dataclass(frozen=True)
class Terminal:
    """The reconcile cannot succeed as the object is: no retry until it changes."""

    reason: str


Outcome = Done | RequeueAfter | Retry | Terminal


class Reconciler(Protocol):
    """Makes the world match one object; the controller calls it for each key it takes."""

    async def reconcile(self, key: NamespacedName) -> Outcome:
        """Reconcile `key`; what the controller does with the key next. Returns a value
        for every failure it knows of; anything it raises is a bug (logged, retried)."""
        ...


def outcome_of(error: AnsibleOperatorError) -> Retry | Terminal:
    """The outcome of a reconcile that raised `error` (a project error, never a bug)."""
    if isinstance(error, Invalid):
        # The API server rejected what we wrote, and would reject the same body again.
        return Terminal(str(error))
    return Retry(str(error), routine=isinstance(error, Conflict))


def result_label(outcome: Outcome) -> str:
    """controller-runtime's `result` label of `controller_runtime_reconcile_total`."""
    match outcome:
        case Done():
            return "success"
        case RequeueAfter():
            return "requeue_after"
        case Retry() | Terminal():
            return "error"
        case _:
            assert_never(outcome)
