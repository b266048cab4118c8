"""The preparations that make Kubernetes modules cheap in process (`kubemodules`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.ansible.hooks import kubemodules


@pytest.mark.parametrize(
    ("url", "plain"),
    [
        pytest.param("http://owner@localhost:8888", "http://localhost:8888", id="user"),
        pytest.param("https://a:b@[::1]:6443/x", "https://[::1]:6443/x", id="user-password-v6"),
        pytest.param("https://127.0.0.1:6443", "https://127.0.0.1:6443", id="none"),
    ],
)
def test_without_userinfo(url: str, plain: str) -> None:
    assert kubemodules.without_userinfo(url) == plain


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: proxy-server
  cluster:
    insecure-skip-tls-verify: true
    server: http://b3duZXI@localhost:8888
contexts:
- name: ns/proxy-server
  context: {cluster: proxy-server, user: admin/proxy-server}
current-context: ns/proxy-server
preferences: {}
users:
- name: admin/proxy-server
  user:
    username: b3duZXI
    password: unused
    token: "0123"
"""


def test_kubeconfigs_parse_the_same_with_libyaml() -> None:
    import yaml

    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML without libyaml")
    shim = kubemodules._LibyamlSafeLoad(yaml)
    assert shim.safe_load(KUBECONFIG) == yaml.safe_load(KUBECONFIG)
    assert shim.safe_dump is yaml.safe_dump


COMPILED_ONCE = textwrap.dedent(
    """\
    import importlib.util, os, sys
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    _AnsibleCollectionFinder(paths=[sys.argv[1]], scan_sys_paths=False)._install()
    from runner.ansible.hooks import kubemodules
    kubemodules._remember_compiled_code()
    fqn = "ansible_collections.ns.col.plugins.modules.probe"
    def code():
        spec = importlib.util.find_spec(fqn)
        return spec.loader.get_code(fqn)
    first, again = code(), code()
    with open(sys.argv[2], "w") as handle:
        handle.write("VALUE = 'edited'\\n")
    edited = code()
    found = {}
    exec(edited, found)
    print(first is again, edited is not first, found["VALUE"])
    """
)


def test_module_code_is_compiled_once_per_version_of_its_file(tmp_path: Path) -> None:
    modules = tmp_path / "ansible_collections" / "ns" / "col" / "plugins" / "modules"
    modules.mkdir(parents=True)
    probe = modules / "probe.py"
    probe.write_text("VALUE = 'first'\n")
    done = subprocess.run(
        [sys.executable, "-c", COMPILED_ONCE, str(tmp_path), str(probe)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == ["True", "True", "edited"]
