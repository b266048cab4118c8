"""OLM v1 on the local cluster: operator-controller and catalogd as local processes.

`install.py` installs and removes it, `objects.py` its kinds and our objects (pure),
`bundlerun.py` installs and upgrades bundle images through a ClusterExtension.
"""
