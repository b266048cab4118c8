"""A zygote whose control socket is closed is dead, whatever its process looks like.

A killed zygote closes its files before it becomes a zombie, so for a moment `poll()`
still says it runs while sending to it fails. A run started then must go to a new
zygote (`run_in` returns None for a zygote that is not alive), not fail.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path

import pytest

from runner.ansible.fastbackend import zygotes


def test_a_zygote_that_cannot_be_reached_is_no_longer_alive() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.close()  # the zygote's end: closed, as by a process that is exiting
    process = subprocess.Popen(["sleep", "30"])  # a process `poll()` calls running
    zygote = zygotes.Zygote.__new__(zygotes.Zygote)
    zygote._socket = ours
    zygote._process = process
    zygote._lock = threading.Lock()
    zygote._send_lock = threading.Lock()
    zygote._runs = {}
    zygote.dead = False
    try:
        assert zygote.alive
        with pytest.raises(zygotes._NotStarted, match="cannot reach the Ansible zygote"):
            zygote.start("run-1", spec=Path("/nonexistent"), tty=0)
        assert not zygote.alive
    finally:
        process.kill()
        process.wait()
        ours.close()
