"""The roles' Kubernetes endpoint: a loopback proxy that injects owners and serves a cache."""
