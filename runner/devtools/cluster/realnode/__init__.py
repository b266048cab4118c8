"""A real node beside the local cluster's fake one: a kubelet with containerd and runc.

`node.py` starts and stops it, `nodeconfig.py` renders its files (pure), `podnet.py` is
its bridge and iptables rules, `machine.py` records each change to the machine and puts it
back, `leftovers.py` finds and sweeps what a crashed node left behind.
"""
