"""Documentation of the Kubernetes authentication options shared by the API modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a mapping.
      - Falls back to C(K8S_AUTH_KUBECONFIG). When neither is set the in-cluster service
        account is tried, then the default kubeconfig (C(KUBECONFIG) or C(~/.kube/config)).
      - Under the operator C(K8S_AUTH_KUBECONFIG) points at the operator's API proxy.
    type: raw
  context:
    description:
      - The kubeconfig context to use. Falls back to C(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the Kubernetes API server. Falls back to C(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API server. Falls back to C(K8S_AUTH_API_KEY).
    type: str
  username:
    description:
      - Username for basic authentication. Falls back to C(K8S_AUTH_USERNAME).
    type: str
  password:
    description:
      - Password for basic authentication. Falls back to C(K8S_AUTH_PASSWORD).
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate.
        Falls back to C(K8S_AUTH_VALIDATE_CERTS) or C(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to the CA bundle that signs the API server's certificate.
        Falls back to C(K8S_AUTH_CA_CERT) or C(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate.
        Falls back to C(K8S_AUTH_CLIENT_CERT) or C(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the client certificate's key.
        Falls back to C(K8S_AUTH_CLIENT_KEY) or C(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
  proxy:
    description:
      - HTTP proxy URL for API requests. Falls back to C(K8S_AUTH_PROXY).
    type: str
  persist_config:
    description:
      - Write refreshed credentials back to the kubeconfig file.
        Falls back to C(K8S_AUTH_PERSIST_CONFIG).
    type: bool
requirements:
  - kubernetes >= 24.2.0
"""
