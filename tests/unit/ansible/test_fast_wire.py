"""runner.ansible.fastbackend.wire: what the fast backend's processes agree on (pure parts)."""

from __future__ import annotations

import os

import pytest

from runner.ansible.fastbackend.wire import (
    DISCOVER_AUTHORIZATION_ENV,
    MAX_MESSAGE,
    PER_RUN_ENV,
    Discovery,
    decode,
    encode,
    exit_code,
    playbook_argv,
    zygote_env,
    zygote_key,
)

PYTHON = "/opt/venv/bin/python3"


def test_messages_round_trip() -> None:
    message = {"op": "run", "id": "123", "spec": "/x/artifacts/123/command"}
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b"{", id="truncated"),
        pytest.param(b"\xff", id="not-utf8"),
    ],
)
def test_bad_messages_are_value_errors(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)


def test_oversized_message_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than"):
        encode({"blob": "x" * MAX_MESSAGE})


def test_zygote_env_drops_what_changes_per_run() -> None:
    run = {key: "per-run" for key in PER_RUN_ENV} | {"PATH": "/bin", "ANSIBLE_GATHERING": "x"}
    assert zygote_env(run) == {"PATH": "/bin", "ANSIBLE_GATHERING": "x"}


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        pytest.param(
            {"PATH": "/bin", "KUBECONFIG": "/a/kubeconfig", "ANSIBLE_ROLES_PATH": "/a/"},
            {"PATH": "/bin", "KUBECONFIG": "/b/kubeconfig", "ANSIBLE_ROLES_PATH": "/b/"},
            True,
            id="per-run-variables-differ",
        ),
        pytest.param(
            {"PATH": "/bin", "AWX_ISOLATED_DATA_DIR": "/a/artifacts/1"},
            {"PATH": "/bin"},
            True,
            id="per-run-variable-missing",
        ),
        pytest.param(
            {"ANSIBLE_COLLECTIONS_PATH": "/a"},
            {"ANSIBLE_COLLECTIONS_PATH": "/b"},
            False,
            id="collections-path-differs",
        ),
        pytest.param({"X": "1"}, {"X": "1", "Y": "2"}, False, id="extra-variable"),
    ],
)
def test_zygote_key(first: dict[str, str], second: dict[str, str], shared: bool) -> None:
    assert (zygote_key(first) == zygote_key(second)) is shared


def test_playbook_argv_runs_this_interpreters_ansible_playbook() -> None:
    command = ["ansible-playbook", "-i", "/d/inventory", "-e", "@/d/env/extravars", "-vv", "p.yml"]
    argv = playbook_argv(command, program="/venv/bin/ansible-playbook")
    assert argv == ["/venv/bin/ansible-playbook", *command[1:]]


@pytest.mark.parametrize(
    "command",
    [pytest.param([], id="empty"), pytest.param(["ansible", "-m", "ping"], id="ad-hoc")],
)
def test_playbook_argv_refuses_other_commands(command: list[str]) -> None:
    with pytest.raises(ValueError):
        playbook_argv(command, program="/venv/bin/ansible-playbook")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(0, 0, id="success"),
        pytest.param(2 << 8, 2, id="failure"),
        pytest.param(9, None, id="killed"),
    ],
)
def test_exit_code(status: int, expected: int | None) -> None:
    assert exit_code(status) == expected
    if expected is not None:
        assert os.waitstatus_to_exitcode(status) == expected


def test_discovery_round_trips_through_the_zygote_command_line_and_environment() -> None:
    discovery = Discovery(
        url="http://localhost:8888",
        kinds=(("v1", "ConfigMap"), ("cache.example.com/v1alpha1", "Memcached")),
        authorization="Basic OnNlY3JldA==",
    )
    argv = discovery.argv()
    urls = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--discover-url"]
    kinds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--discover-kind"]
    # The proxy's credential is never on a command line (any local user can read those).
    assert not any("OnNlY3JldA" in arg for arg in argv)
    assert "OnNlY3JldA" not in repr(discovery)
    authorization = discovery.env()[DISCOVER_AUTHORIZATION_ENV]
    assert Discovery.from_argv(urls[0], kinds, authorization=authorization) == discovery
    assert Discovery.from_argv(None, kinds) is None
    assert Discovery(url="http://localhost:1", kinds=()).env() == {}


@pytest.mark.parametrize("kind", ["ConfigMap", ":ConfigMap", "v1:"])
def test_discovery_refuses_a_kind_without_its_api_version(kind: str) -> None:
    with pytest.raises(ValueError, match=kind):
        Discovery.from_argv("http://localhost:1", [kind])
