"""The developer's toolbox beside the runtime (`run` never needs it).

`cluster/` the local control plane built from Go modules (and `realnode/`, a real kubelet),
`images` container images made on this machine, `olm/` the real OLM v0 and v1 on that
cluster, `scaffold/` new projects (`init`, `create api|webhook`), `packaging/` OLM bundles
and catalogs. The one piece the runtime takes from here is `cluster.trust` (signing a
loopback webhook certificate with a local cluster's CA).
"""
