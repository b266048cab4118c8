"""What the fast backend's zygote imports while warming up: the module_utils its runs
use, not the generated Kubernetes API and model classes only `k8s_cp` needs (about
21 MiB in every zygote; a run of `k8s_cp` imports them in its own fork)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from runner.ansible.bundledcollection import bundled_collections_path

WARM_UP = """
    import json, sys
    from runner.ansible.hooks import zygote
    errors = zygote.warm_up()
    utils = "ansible_collections.kubernetes.core.plugins.module_utils"
    found = {
        "errors": errors,
        "generated": sorted(
            m for m in sys.modules if ".client.models." in m or ".client.api." in m
        ),
        "warm": [
            m in sys.modules
            for m in (f"{utils}.k8s.client", f"{utils}.k8s.service", "kubernetes.dynamic")
        ],
    }
    print(json.dumps(found))
"""


def test_warm_up_leaves_the_generated_classes_to_the_run_that_needs_them() -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(bundled_collections_path())}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WARM_UP)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert found["errors"] == []
    assert found["generated"] == []
    assert found["warm"] == [True, True, True]


AFTER_WARM_UP = """
    import json
    from runner.ansible.hooks import zygote
    zygote.warm_up()
    from ansible import constants
    from ansible.plugins import loader
    import ansible.plugins.loader as plugin_loader
    parsed = []
    real = plugin_loader.add_fragments
    def counting(dstring, path, *args, **kwargs):
        parsed.append(path.rsplit("/", 1)[-1])
        return real(dstring, path, *args, **kwargs)
    plugin_loader.add_fragments = counting
    plugins = [loader.inventory_loader.get(name) for name in constants.INVENTORY_ENABLED]
    list(loader.callback_loader.all(class_only=True))
    print(json.dumps({
        "parsed": parsed,
        "loaded": [type(p).__module__.rsplit(".", 1)[-1] for p in plugins],
        "options": constants.config.get_configuration_definitions("inventory", "yaml") != {},
    }))
"""


def test_a_run_parses_no_plugin_documentation_the_zygote_parsed() -> None:
    """What a run loads by name (the enabled inventory plugins) and every callback have
    their documentation parsed in the zygote: none again, also without options."""
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(bundled_collections_path())}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(AFTER_WARM_UP)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert found["parsed"] == []
    assert found["loaded"] == ["host_list", "script", "auto", "yaml", "ini", "toml"]
    assert found["options"]  # registered as before
