"""A real Kubernetes control plane on this machine, built from Go modules.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as local
processes on loopback ports; kwok stands in for kubelets so Deployments get Ready pods.
"""
