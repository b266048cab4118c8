"""Scaffolding of new operator projects: `ansible-operator init` and `create api`."""
