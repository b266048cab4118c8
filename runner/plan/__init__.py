"""`ansible-operator plan`: what one reconcile of a CR would change, with nothing changed.

The reconcile runs as `run` would run it, but its API proxy answers through a dry-run
layer (`dryrun.py`): every write goes to the API server with `dryRun=All` and its result
is kept in an overlay (`overlay.py`) that later reads of the same run see. What the
overlay holds at the end, against what the cluster holds, is the plan (`diff.py`,
`render.py`). Tasks that act outside the Kubernetes API are skipped by an ansible-core
hook (`runner.ansible.hooks.preview`) unless the user allows them. `session.py` composes it.
"""
