"""Admission (validating, mutating) and conversion webhooks whose logic is an Ansible role.

declarations (webhooks.yaml) -> contract (role vars in, facts out; pure) -> roles (runs,
slots, failure policy, metrics) -> server (HTTPS, certificate reload) -> runtime (inside
`ansible-operator run`), devsetup (registration against a local cluster).
See docs/webhooks.md.
"""
