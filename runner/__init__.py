"""ansible-operator: reconcile Kubernetes custom resources with Ansible."""

__version__ = "0.1.0"
