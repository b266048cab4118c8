"""The Ansible operator on the generic engine: what a reconcile of a CR is.

`reconciler.py` one reconcile (finalizer, Running, extra-vars, the Ansible run, conditions),
`crwriter.py` its writes to the CR, `finalizers.py` finalizers no watch handles any more,
`reloadgate.py` and `reload.py` live reload, `absent.py` CRs deleted while stopped,
`builder.py` a controller per watch, `settings.py` and `run.py` the composition of `run`.
"""
