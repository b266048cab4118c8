"""The real Operator Lifecycle Manager on the local cluster, and bundles installed through it.

`ansible-operator olm install` runs OLM's `olm` and `catalog` operators (built from Go
modules) as local processes against the cluster; `olm run-bundle` serves a bundle
directory as a file-based catalog with `opm serve` on a loopback port and subscribes a
namespace to it, as `operator-sdk run bundle` does with images. See docs/olm.md.

Pure parts: `model` (the objects), `installmode`, `report` (status lines and failures),
`tokens` (service-account kubeconfigs). I/O: `api`, `control` (OLM itself), `serve`
(opm), `bundles` (run-bundle, upgrade, approve), `runrecord` (each run's record),
`installwait` (waiting for a CSV), `installed` (status, kubeconfig, cleanup), `commands`
(the CLI).
"""
