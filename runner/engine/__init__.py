"""The reconcile engine: informers (`runner.k8s.informer`) feed a work queue that workers
drain through the reconciler; controllers wire one watch, the manager runs them all.

Only the building blocks are re-exported here; import controllers and the manager from
their own modules so that importing the engine does not pull in the Ansible side.
"""

from runner.engine.queue import QueueShutDown, WorkQueue

__all__ = ["QueueShutDown", "WorkQueue"]
