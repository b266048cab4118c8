"""The webhooks inside `ansible-operator run`: flags, and serving for the operator's life.

`running()` is the one call `run` makes: with no webhooks declared it does nothing;
otherwise it starts the webhooks' own Ansible backend, the HTTPS server, and (against a
local cluster) registers the webhooks for the operator's life (`devsetup.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from runner.ansible import hooks
from runner.ansible.backend import LogEvents
from runner.ansible.fastbackend import FastBackend
from runner.ansible.runnerbackend import RunnerBackend
from runner.ansible.warm.pool import WarmRunners
from runner.errors import ConfigError
from runner.k8s.client import KubeClient
from runner.util.cpulimit import available_cpus
from runner.webhooks import declarations
from runner.webhooks.declarations import Webhook
from runner.webhooks.server import devsetup, warmtargets
from runner.webhooks.server.https import CERT_FILE, CertificateReloader, WebhookServer
from runner.webhooks.server.roles import EventLog, RunOptions, WebhookMetrics, WebhookRunner

__all__ = [
    "BackendChoice",
    "RunOptions",
    "WebhookServer",
    "WebhookSettings",
    "add_arguments",
    "load",
    "running",
    "settings_from",
]

log = logging.getLogger("ansible-operator.webhooks")

REGISTER_KUBECONFIG_ENV = "ANSIBLE_OPERATOR_WEBHOOK_KUBECONFIG"
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
"""Where controller-runtime operators (and OLM, for webhookdefinitions) expect the pair."""


@dataclass(frozen=True)
class BackendChoice:
    """The reconciles' backend class and options; the webhooks get their own instance."""

    type: type[RunnerBackend | FastBackend]
    share_payloads: bool = True
    log_events: LogEvents = "tasks"
    debug_logs: bool = False

    def make(
        self, base_dir: Path, workers: int, envvars: Mapping[str, str]
    ) -> RunnerBackend | FastBackend:
        backend = self.type(
            base_dir=base_dir,
            # A webhook role has no use for facts, and gathering them costs more than
            # the whole of a small role's run.
            env={"ANSIBLE_GATHERING": "explicit"},
            log_events=self.log_events,
            debug_logs=self.debug_logs,
            max_workers=workers,
            share_payloads=self.share_payloads,
        )
        if isinstance(backend, FastBackend):
            backend.start(envvars=envvars)  # warms up while the server starts
        return backend


@dataclass(frozen=True)
class WebhookSettings:
    webhooks_file: Path
    host: str
    port: int
    cert_dir: Path
    workers: int
    register: str  # auto, true or false
    register_kubeconfig: str = ""
    runner: str = "warm"  # warm or full


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `run` flags of the webhooks (docs/webhooks.md)."""
    group = parser.add_argument_group("webhooks (see docs/webhooks.md)")
    group.add_argument(
        "--webhooks-file",
        default="./webhooks.yaml",
        metavar="PATH",
        help="the webhook declarations; none served when the file does not exist",
    )
    group.add_argument(
        "--webhook-bind-address",
        default=":9443",
        metavar="ADDRESS",
        help="[host]:port of the HTTPS webhook server",
    )
    group.add_argument(
        "--webhook-cert-dir",
        default=DEFAULT_CERT_DIR,
        metavar="DIR",
        help="directory with tls.crt and tls.key, reloaded when they change",
    )
    group.add_argument(
        "--webhook-workers",
        type=int,
        default=max(2, 2 * available_cpus()),
        metavar="N",
        help="webhook role runs at once, apart from the reconciles' workers",
    )
    group.add_argument(
        "--webhook-runner",
        default="warm",
        choices=("warm", "full"),
        help="warm: a webhook whose tasks allow it runs them in a warm process per "
        "webhook (the others, and all with the runner backend, run ansible-playbook per "
        "request); full: every request runs ansible-playbook",
    )
    group.add_argument(
        "--webhook-register",
        default="auto",
        choices=("auto", "true", "false"),
        help="register the webhooks at the loopback server for the operator's life "
        "(auto: when the API server is on this machine)",
    )
    group.add_argument(
        "--webhook-register-kubeconfig",
        default="",
        metavar="PATH",
        help="credentials for that registration, when the operator's own may not create "
        f"webhook configurations (default: ${REGISTER_KUBECONFIG_ENV}, else the operator's)",
    )


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> WebhookSettings:
    address = str(args.webhook_bind_address)
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--webhook-bind-address: {address!r} is not host:port or :port")
    if args.webhook_workers < 1:
        raise ConfigError(f"--webhook-workers: must be 1 or more, got {args.webhook_workers}")
    return WebhookSettings(
        webhooks_file=Path(args.webhooks_file),
        host=host.strip("[]"),
        port=int(port),
        cert_dir=Path(args.webhook_cert_dir),
        workers=args.webhook_workers,
        register=str(args.webhook_register),
        register_kubeconfig=args.webhook_register_kubeconfig
        or environ.get(REGISTER_KUBECONFIG_ENV, ""),
        runner=str(getattr(args, "webhook_runner", "warm")),
    )


def load(settings: WebhookSettings, environ: Mapping[str, str]) -> tuple[Webhook, ...]:
    webhooks = declarations.load(settings.webhooks_file, environ=environ, cwd=Path.cwd())
    for webhook in webhooks:
        log.info("%s runs %s", webhook.describe(), webhook.target)
    return webhooks


async def _warm(runner: WebhookRunner, *, limit: float = 120.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while runner.warming() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)


def _warm_runners(
    webhooks: Sequence[Webhook],
    settings: WebhookSettings,
    backend: RunnerBackend | FastBackend,
    *,
    run_dir: Path,
    options: RunOptions,
) -> WarmRunners | None:
    """The webhooks' warm runners (docs/webhooks.md), or None when every request is a
    full run (said once, with why)."""
    why = None
    if settings.runner != "warm":
        why = "--webhook-runner full"
    elif not isinstance(backend, FastBackend):
        why = "the warm runner comes with the fast backend"
    elif not hooks.enabled("warmrole", hooks.installed_core_version() or ""):
        why = (
            f"the warm runner was not tested with ansible-core "
            f"{hooks.installed_core_version() or '(none)'}"
        )
    if why is not None or not isinstance(backend, FastBackend):
        log.info("webhooks run each request as a full run: %s", why)
        return None
    env = backend.run_environment(options.envvars)
    why = warmtargets.why_full(env, options.ansible_args)
    if why is not None:
        log.info("webhooks run each request as a full run: %s", why)
        return None
    warm = WarmRunners(max_processes=min(settings.workers, available_cpus()), logger=log)
    for webhook in webhooks:
        target = warmtargets.target(
            webhook,
            base=run_dir / "webhooks",
            run_env=env,
            verbosity=options.verbosity,
        )
        warm.add(warmtargets.warm_key(webhook), target)
    return warm


@contextlib.asynccontextmanager
async def running(
    webhooks: Sequence[Webhook],
    settings: WebhookSettings,
    *,
    client: KubeClient,
    backend: BackendChoice,
    registry: CollectorRegistry,
    run_dir: Path,
    options: RunOptions,
    namespaces: Sequence[str] | None = None,
    dev_certificates: Callable[[Path], bytes] | None = None,
) -> AsyncIterator[WebhookServer | None]:
    """Serve `webhooks` until the block ends (nothing at all when there are none).

    `dev_certificates(directory)` writes the serving pair a registration for development
    uses when no `--webhook-cert-dir` pair exists, and returns its CA: signed by the
    local cluster's CA when the caller knows it, else by a CA made for this process.

    `namespaces` (WATCH_NAMESPACE): a registration for development only sends requests
    in those namespaces, so an operator scoped to a namespace leaves the rest of a
    shared cluster alone."""
    if not webhooks:
        yield None
        return
    register = settings.register == "true" or (
        settings.register == "auto" and devsetup.is_loopback_server(client.server)
    )
    cert_dir = settings.cert_dir
    ca_pem = b""
    if register and not (cert_dir / CERT_FILE).exists():
        cert_dir = run_dir / "webhook-certs"
        ca_pem = (dev_certificates or devsetup.write_dev_certificates)(cert_dir)
        log.info(
            "webhook serving certificate in %s, signed by %s",
            cert_dir,
            "the local cluster's CA" if dev_certificates else "a CA made for this process",
        )
    elif register:
        ca_file = cert_dir / "ca.crt"
        ca_pem = (ca_file if ca_file.exists() else cert_dir / CERT_FILE).read_bytes()
    elif not (cert_dir / CERT_FILE).exists():
        raise ConfigError(
            f"{settings.webhooks_file} declares webhooks but {cert_dir / CERT_FILE} does not "
            "exist: mount the serving certificate there (cert-manager, OLM) or set "
            "--webhook-cert-dir"
        )
    host = settings.host or ("127.0.0.1" if register else "")
    async with contextlib.AsyncExitStack() as stack:
        own_backend = backend.make(run_dir / "webhooks", settings.workers, options.envvars)
        stack.push_async_callback(own_backend.close)
        warm = _warm_runners(webhooks, settings, own_backend, run_dir=run_dir, options=options)
        runner = WebhookRunner(
            own_backend,
            workers=settings.workers,
            options=options,
            metrics=WebhookMetrics(registry),
            warm=warm,
            warm_log=EventLog(own_backend.runs.logger, backend.log_events, backend.debug_logs),
        )
        stack.push_async_callback(runner.close)
        server = WebhookServer(
            webhooks,
            runner,
            host=host,
            port=settings.port,
            certificates=CertificateReloader(cert_dir),
        )
        try:
            port = await server.start()
        except OSError as err:
            raise ConfigError(f"--webhook-bind-address: cannot listen: {err}") from err
        stack.push_async_callback(server.stop)
        if register:
            # Registered once runs are fast: the first requests must not time out on
            # the warm-up (in a cluster, the pod's readiness covers it).
            await _warm(runner)
            registrar = client
            if settings.register_kubeconfig:
                registrar = await KubeClient.connect(kubeconfig=settings.register_kubeconfig)
                stack.push_async_callback(registrar.close)
            registration = devsetup.DevRegistration(
                registrar,
                webhooks,
                url=f"https://127.0.0.1:{port}",
                ca_pem=ca_pem,
                name=devsetup.configuration_name(Path.cwd()),
                namespaces=namespaces,
            )
            stack.push_async_callback(registration.remove)
            await registration.apply()
        yield server
