"""`runner.k8s` imports kubernetes-asyncio without its generated API and model classes
(tens of MiB in every operator process), and a name from them still resolves on demand."""

from __future__ import annotations

import json
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


def test_aiohttp_default_contexts_load_the_ca_bundle_beside_the_import() -> None:
    """aiohttp's import-time default SSL contexts are made without parsing the CA bundle
    (a thread loads it), end up with the certificates an ordinary import gives them, and
    the environment the import saw is put back."""
    out = _python(
        """
        import os, threading, json
        before = os.environ.get("SSL_CERT_FILE")
        import runner.k8s
        from aiohttp import connector
        contexts = [connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED]
        for thread in threading.enumerate():
            if thread.name == "ca-bundle":
                thread.join(30)
        import ssl
        ordinary = ssl.create_default_context().cert_store_stats()["x509_ca"]
        print(json.dumps({
            "loaded": [c.cert_store_stats()["x509_ca"] for c in contexts],
            "ordinary": ordinary,
            "env_kept": os.environ.get("SSL_CERT_FILE") == before,
        }))
        """
    )
    found = json.loads(out)
    assert found["env_kept"]
    assert found["loaded"] == [found["ordinary"]] * 2


def test_urllib3_is_not_imported_and_stays_importable() -> None:
    out = _python(
        """
        import sys
        import runner.k8s
        from kubernetes_asyncio.client import Configuration
        Configuration()
        missing = "urllib3" not in sys.modules
        import urllib3
        print(missing, hasattr(urllib3, "PoolManager"))
        """
    )
    assert out == "True True"


def test_dateutil_and_thread_pool_are_imported_at_their_first_use() -> None:
    """The API client's python-dateutil parser and ThreadPool (for model classes and
    `async_req`, which the runtime never uses) are stand-ins until first called; then
    they give what the real ones give, and both modules import as ever."""
    out = _python(
        """
        import json, sys
        import runner.k8s
        from kubernetes_asyncio.client import api_client
        api_client.ApiClient  # the module is complete
        before = [m for m in ("dateutil.parser", "multiprocessing.pool") if m in sys.modules]
        parsed = api_client.parse("2026-11-28T03:00:00Z").isoformat()
        pool = api_client.ThreadPool(1)
        from multiprocessing.pool import ThreadPool
        from dateutil.parser import parse
        real = isinstance(pool, ThreadPool) and parse("2026-11-28T03:00:00Z").isoformat() == parsed
        pool.close()
        print(json.dumps({"before": before, "parsed": parsed, "real": real}))
        """
    )
    assert json.loads(out) == {"before": [], "parsed": "2026-11-28T03:00:00+00:00", "real": True}
