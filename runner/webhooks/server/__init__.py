"""Serving the webhooks of runner.webhooks inside `ansible-operator run`.

roles (runs, slots, failure policy, metrics) -> https (the server, certificate reload) ->
runtime (flags, the one call `run` makes) and devsetup (registration against a local
cluster). The declarations and the role contract, which the scaffolding and packaging
use too, are pure and live in runner.webhooks. See docs/webhooks.md.
"""
