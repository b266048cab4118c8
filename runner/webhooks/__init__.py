"""Admission (validating, mutating) and conversion webhooks whose logic is an Ansible role:
the pure half.

declarations (webhooks.yaml) -> contract (role vars in, facts out) -> manifests (the
webhook configurations and CRD conversion the API server is given). The serving half is
runner.webhooks.server. See docs/webhooks.md.
"""
