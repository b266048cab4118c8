"""The ansible-runner backend (`--ansible-backend runner`): see `ansiblerunner.py`."""

from runner.ansible.runnerbackend.ansiblerunner import RunnerBackend

__all__ = ["RunnerBackend"]
