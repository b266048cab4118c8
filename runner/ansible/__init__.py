"""Running Ansible for one CR: input directory, backends, artifacts and job events.

This package is `runner.ansible`; it must never shadow the real `ansible` package, so
modules here (and everywhere in `runner`) use absolute imports only.
"""
