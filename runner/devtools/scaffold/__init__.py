"""Scaffolding of new operator projects: `ansible-operator init` and `create api`.

Renderers are pure and return file text: `files_project` (Makefile, Dockerfile, ...),
`files_config` (config/), `csvbase` (the CSV base), `molecule`, `files_api` (one kind's
CRD, role, RBAC, sample), `molecule_kind` (the Molecule scenarios of each kind and the
playbooks they share, from `molecule_cluster` and `molecule_runs`). `generate` turns a
request into a `Plan` of files to create and files to extend (`extend`, `yamltext` keep the
user's comments); `writer` is the only IO.
Names are validated in `names`, the PROJECT file is read and written by `project`.
"""
