"""Small helpers any layer may use, each pure or nearly so.

Durations (`durations`), label selectors (`labelselector`), typed reads of JSON fields
(`fields`), masking of credentials (`redact`), YAML errors, nodes and output (`yamlerror`,
`yamlnodes`, `yamlwriter`), a CA for loopback servers (`certauthority`), the cgroup CPU
limit (`cpulimit`) and a terminal progress bar (`progress`).
"""
