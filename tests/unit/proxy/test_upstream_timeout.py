"""How long the API proxy waits on the API server: bounded for every request but
watches, and watches only as long as they may legitimately stay silent."""

from __future__ import annotations

import pytest

from runner.proxy.forward import REQUEST_TIMEOUT_SECONDS, WATCH_GRACE_SECONDS, upstream_timeout


@pytest.mark.parametrize("verb", ["get", "list", "create", "update", "patch", "delete"])
def test_requests_that_are_not_watches_have_a_total_limit(verb: str) -> None:
    timeout = upstream_timeout(verb, {})
    assert timeout.total == REQUEST_TIMEOUT_SECONDS
    assert timeout.connect is not None and timeout.connect <= REQUEST_TIMEOUT_SECONDS


def test_the_limit_can_be_shorter() -> None:
    timeout = upstream_timeout("get", {}, total=2)
    assert (timeout.total, timeout.connect) == (2, 2)


@pytest.mark.parametrize(
    ("query", "quiet"),
    [
        pytest.param({"timeoutSeconds": "60"}, 60 + WATCH_GRACE_SECONDS, id="asked"),
        pytest.param({}, 3600 + WATCH_GRACE_SECONDS, id="server-maximum"),
        pytest.param({"timeoutSeconds": "0"}, 3600 + WATCH_GRACE_SECONDS, id="zero"),
        pytest.param({"timeoutSeconds": "x"}, 3600 + WATCH_GRACE_SECONDS, id="garbage"),
        pytest.param({"timeoutSeconds": "99999"}, 3600 + WATCH_GRACE_SECONDS, id="capped"),
    ],
)
def test_watches_have_no_total_but_a_bounded_silence(query: dict[str, str], quiet: int) -> None:
    timeout = upstream_timeout("watch", query)
    assert timeout.total is None
    assert timeout.sock_read == quiet


@pytest.mark.parametrize(
    ("query", "endless"),
    [
        pytest.param({"follow": "true", "container": "c"}, True, id="followed"),
        pytest.param({"follow": "1"}, True, id="followed-1"),
        pytest.param({"follow": "false"}, False, id="not-followed"),
        pytest.param({}, False, id="plain"),
    ],
)
def test_a_followed_log_is_bounded_only_while_connecting(
    query: dict[str, str], endless: bool
) -> None:
    """`k8s_log` with `follow` lasts as long as the container, which may stay silent."""
    timeout = upstream_timeout("get", query, subresource="log")
    if endless:
        assert (timeout.total, timeout.sock_read) == (None, None)
        assert timeout.connect is not None
    else:
        assert timeout.total == REQUEST_TIMEOUT_SECONDS
