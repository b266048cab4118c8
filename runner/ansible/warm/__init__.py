"""Warm runners: a webhook's play loaded once in a process of its own, run per request.

`pool.py` is the operator's side (processes per webhook, requests, timeouts, reloads),
`warmprocess.py` the process itself, `frames.py` what goes between them; the ansible-core
side is the `warmrole` hook (`runner.ansible.hooks.warmrole`). See docs/webhooks.md.
"""
