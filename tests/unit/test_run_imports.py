"""`ansible-operator run` leaves out the modules an ordinary run never uses: each is
memory in every operator process (`cryptography` alone about 10 MiB). Certificates are
made, and `cryptography` imported, only when one is needed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from runner.devtools.cluster.certs import ensure_pki
from runner.webhooks.server.devsetup import write_dev_certificates

# Modules of other sub-commands, or of features off by default.
NOT_ON_THE_RUN_PATH = (
    "cryptography",  # certificates: made only for webhooks or self-signed metrics
    "runner.util.certauthority",
    "runner.devtools.cluster.certs",
    "runner.devtools.cluster.local",  # the local control plane (`cluster up`)
    "runner.cli.clustercmd",
    "watchdog",  # `--reload` only
)

# What `run` does before it serves: parse the flags, build the settings, import the
# runtime, load a given metrics certificate and look for a local cluster's CA.
START = """
    import json, os, sys
    from runner.cli.main import build_parser
    from runner.cli.runsettings import settings_from
    import runner.operator.run
    from runner.devtools.cluster.trust import local_cluster_signer
    from runner.observability.serving import tls_context

    args = build_parser().parse_args(
        ["run", "--metrics-secure", "--metrics-cert-path", sys.argv[1]]
    )
    settings_from(args, os.environ)
    tls_context(sys.argv[1])
    signer = local_cluster_signer(sys.argv[2], None, {"ANSIBLE_OPERATOR_CLUSTER_DIR": sys.argv[3]})
    loaded = lambda: sorted(n for n in sys.argv[4].split(",") if n in sys.modules)
    before = loaded()
    signer(__import__("pathlib").Path(sys.argv[5]))
    print(json.dumps({"before": before, "after_signing": loaded()}))
"""


def test_the_run_path_imports_no_certificate_maker_until_it_signs(tmp_path: Path) -> None:
    certs = tmp_path / "metrics"
    write_dev_certificates(certs)
    pki = ensure_pki(tmp_path / "cluster" / "pki")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(START),
            str(certs),
            str(pki.ca_cert),
            str(tmp_path / "cluster"),
            ",".join(NOT_ON_THE_RUN_PATH),
            str(tmp_path / "webhook-certs"),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    found = json.loads(out)
    assert found["before"] == []
    # The local cluster was recognised without `cryptography`; signing loads it.
    assert "cryptography" in found["after_signing"]
    assert (tmp_path / "webhook-certs" / "tls.crt").is_file()


# Imported by the first run or by other sub-commands, not on the way to the operator's
# readiness (`python -X importtime` of a start; docs/fast-backend.md, "Start-up").
NOT_BEFORE_READY = (
    "ansible_runner",  # the runs' machinery: imported with the zygote's start
    "requests",  # ansible-runner's plugins (ansible-runner-http)
    "runner.devtools.cluster.build",  # `image` and `cluster`: building Go components
    "runner.devtools.cluster.components",
    "dateutil.parser",  # kubernetes-asyncio's API client: model classes' dates
    "multiprocessing.pool",  # kubernetes-asyncio's API client: `async_req` calls
)


def test_the_run_path_leaves_the_runs_machinery_for_later() -> None:
    code = """
        import sys
        from runner.cli.main import build_parser
        build_parser().parse_args(["run"])
        import runner.operator.run
        print(sorted(n for n in sys.argv[1].split(",") if n in sys.modules))
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), ",".join(NOT_BEFORE_READY)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert out == "[]"
