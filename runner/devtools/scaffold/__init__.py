"""Scaffolding of new operator projects: `ansible-operator init` and `create api`.

Renderers are pure and return file text: `files/` (`toplevel`: Makefile, Dockerfile, ...;
`config`: config/; `metricsconfig`; `api`: one kind's CRD, role, RBAC, sample), `csvbase`
(the CSV base), `molecule/` (`scenarios`: `default` and `kind`; `perkind`: each kind's
scenarios and the playbooks they share, from `clusterside` and `scenarioruns`), `webhook/`
(`create webhook`). `generate` turns a request into a `Plan` of files to create and files
to extend (`extend`, `yamltext` keep the user's comments); `writer` is the only IO.
Names are validated in `names`, the PROJECT file is read and written by `projectfile`.
"""
