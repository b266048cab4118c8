"""The roles' own metrics: the receiving end of `operator_sdk.util.osdk_metric`.

A task POSTs `{"name", "description", "<type>": {...}}` to the operator's loopback
endpoint (`localhost:5050/metrics` as in the original; ours can move, and each run is told
where through `ANSIBLE_OPERATOR_USER_METRICS_ADDRESS`). The metric is created on first use
in the operator's registry, with no name prefix and default buckets, and exported with the
operator's other metrics. Rules, from the original: one metric type per request; a counter
cannot go down; a name keeps its first type; gauge operations are taken in the order
increment > decrement > add > subtract > set > set_to_current_time (the original ignored
`set: 0` — here 0 is a value like any other). An empty operation is not an error: an
empty counter or gauge is created and left as it is, an empty histogram or summary
observes 0, as in the original. A request that is refused creates nothing. A counter is
exported under exactly the name the role gave, as the original's Go client does:
prometheus-client would add `_total` to `things` (and did, to a name already ending in
it, nothing).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, Histogram, Summary
from prometheus_client.metrics_core import Metric as MetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("ansible-operator.usermetrics")

ADDRESS_ENV = "ANSIBLE_OPERATOR_USER_METRICS_ADDRESS"
_TYPES = ("counter", "gauge", "histogram", "summary")
_GAUGE_ORDER = ("increment", "decrement", "add", "subtract", "set", "set_to_current_time")

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


class Counter(Collector):
    """A counter exported as `name` exactly: typed `counter` when the name ends in
    `_total` (the only spelling the text format allows a counter), untyped otherwise,
    which is how Prometheus reads the original's `# TYPE name counter` without `_total`
    anyway. Same value either way."""

    def __init__(self, name: str, documentation: str, *, registry: CollectorRegistry) -> None:
        if not _NAME.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        self._name = name
        self._documentation = documentation
        self._value = 0.0
        self._lock = threading.Lock()
        registry.register(self)  # ValueError when the name is taken

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:
            self._value += amount

    def collect(self) -> Iterator[MetricFamily]:
        if self._name.endswith("_total"):  # the family is named without the suffix
            family = MetricFamily(self._name[: -len("_total")], self._documentation, "counter")
        else:
            family = MetricFamily(self._name, self._documentation, "unknown")
        with self._lock:
            family.add_sample(self._name, {}, self._value)
        yield family


Metric = Counter | Gauge | Histogram | Summary


class MetricError(ValueError):
    """A request the endpoint answers with 400 and this message."""


class UserMetrics:
    """Metrics created by roles, by name, in the operator's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._metrics: dict[str, tuple[str, Metric]] = {}

    def apply(self, payload: Mapping[str, Any]) -> None:
        """Create or update the metric `payload` describes; MetricError if it is wrong."""
        name = payload.get("name")
        description = payload.get("description")
        if not isinstance(name, str) or not name:
            raise MetricError("name is required")
        if not isinstance(description, str) or not description:
            raise MetricError(f"metric {name}: description is required")
        given = [kind for kind in _TYPES if isinstance(payload.get(kind), Mapping)]
        if len(given) != 1:
            raise MetricError(
                f"metric {name}: exactly one of {', '.join(_TYPES)} is required, got {given}"
            )
        kind = given[0]
        # Checked in full before the metric is created: a refused request leaves no trace.
        update = _update(name, kind, payload[kind])
        update(self._metric(name, description, kind))

    def _metric(self, name: str, description: str, kind: str) -> Metric:
        known = self._metrics.get(name)
        if known is not None:
            if known[0] != kind:
                raise MetricError(f"metric {name} is a {known[0]}, not a {kind}")
            return known[1]
        factory = {"counter": Counter, "gauge": Gauge, "histogram": Histogram, "summary": Summary}
        try:
            metric: Metric = factory[kind](name, description, registry=self._registry)
        except ValueError as err:  # an invalid name, or one the operator's metrics use
            raise MetricError(f"metric {name}: {err}") from None
        self._metrics[name] = (kind, metric)
        return metric


def _number(name: str, option: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise MetricError(f"metric {name}: {option} must be a number, got {value!r}")
    return float(value)


def _update(name: str, kind: str, options: Mapping[str, Any]) -> Callable[[Metric], None]:
    """What the request does to the metric, validated. As in the original, an empty
    counter or gauge only makes sure the metric exists, and an empty histogram or summary
    observes 0 (the Go module's zero value)."""
    if kind == "counter":
        return _counter_update(name, options)
    if kind == "gauge":
        return _gauge_update(name, options)
    value = _number(name, "observe", options.get("observe")) or 0.0

    def observe(metric: Metric) -> None:
        assert isinstance(metric, Histogram | Summary)
        metric.observe(value)

    return observe


def _counter_update(name: str, options: Mapping[str, Any]) -> Callable[[Metric], None]:
    amount = 1.0 if options.get("increment") else _number(name, "add", options.get("add"))
    if amount is not None and amount < 0:
        raise MetricError(f"metric {name}: a counter cannot be decreased (add: {amount})")

    def count(metric: Metric) -> None:
        assert isinstance(metric, Counter)
        if amount:
            metric.inc(amount)

    return count


def _gauge_update(name: str, options: Mapping[str, Any]) -> Callable[[Metric], None]:
    for option in _GAUGE_ORDER:
        value = options.get(option)
        if value is None or value is False:
            continue
        if option in ("increment", "decrement", "set_to_current_time"):
            number = 1.0
        else:
            checked = _number(name, option, value)
            assert checked is not None
            number = checked
        return partial(_gauge_apply, option, number)
    return lambda metric: None


def _gauge_apply(option: str, number: float, metric: Metric) -> None:
    assert isinstance(metric, Gauge)
    if option == "set_to_current_time":
        metric.set_to_current_time()
    elif option in ("increment", "add"):
        metric.inc(number)
    elif option in ("decrement", "subtract"):
        metric.dec(number)
    else:
        metric.set(number)


class UserMetricsServer:
    """`POST /metrics` on a loopback address; `port` 0 picks a free one."""

    def __init__(self, metrics: UserMetrics, *, host: str = "127.0.0.1", port: int = 5050) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"http://{self._host}:{self.port}/metrics"

    async def start(self) -> int:
        app = web.Application()
        app.router.add_post("/metrics", self._post)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _post(self, request: web.Request) -> web.Response:
        try:
            payload = await request.json()
        except ValueError:
            return web.Response(status=400, text="the body is not JSON")
        if not isinstance(payload, Mapping):
            return web.Response(status=400, text="the body is not a JSON object")
        try:
            self._metrics.apply(payload)
        except MetricError as err:
            log.warning("rejected a user metric: %s", err)
            return web.Response(status=400, text=str(err))
        return web.Response(status=200, text="ok")
