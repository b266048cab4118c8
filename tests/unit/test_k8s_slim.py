"""`runner.k8s` imports kubernetes-asyncio without its generated API and model classes
(tens of MiB in every operator process), and a name from them still resolves on demand."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_the_client_loads_no_generated_class() -> None:
    out = _python(
        """
        import sys
        import runner.k8s
        from kubernetes_asyncio import client, config
        assert client.ApiClient and client.Configuration and config.load_kube_config
        print(sorted(m for m in sys.modules if ".models." in m or ".client.api." in m))
        """
    )
    assert out == "[]"


def test_a_generated_class_is_still_there_when_asked_for() -> None:
    out = _python(
        """
        import runner.k8s
        import kubernetes_asyncio
        from kubernetes_asyncio import client
        watch = kubernetes_asyncio.watch
        print(client.V1Pod.__name__, client.CoreV1Api.__name__, watch.Watch.__name__)
        """
    )
    assert out == "V1Pod CoreV1Api Watch"
