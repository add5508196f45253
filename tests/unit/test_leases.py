"""Lease owners: who may be judged dead, and by whom (`_db/leases.py`)."""

from __future__ import annotations

import os
import subprocess
import sys

from langgraph_durable._db import owner_is_dead, process_owner


def owner_with(**changes: str) -> str:
    host, pid, start, boot, namespace = process_owner().split(":")
    fields = {"host": host, "pid": pid, "start": start, "boot": boot, "namespace": namespace}
    fields.update(changes)
    return ":".join(fields[k] for k in ("host", "pid", "start", "boot", "namespace"))


def test_this_process_is_alive() -> None:
    assert not owner_is_dead(process_owner())


def test_a_gone_or_reused_pid_on_this_machine_is_dead() -> None:
    assert owner_is_dead(owner_with(pid="999999999"))
    assert owner_is_dead(owner_with(start="1"))  # our pid, but another process's start


def test_a_zombie_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    try:
        with open(f"/proc/{child.pid}/stat", encoding="ascii") as stat:
            start = stat.read().rsplit(")", 1)[1].split()[19]
        assert owner_is_dead(owner_with(pid=str(child.pid), start=start))
    finally:
        child.wait()


def test_owners_this_checker_cannot_see_are_never_judged_dead() -> None:
    """Another host, another boot, or a container sharing the hostname (another pid
    namespace): the pid means nothing here, so the lease must run out instead."""
    assert not owner_is_dead(owner_with(host="another-host", pid="999999999"))
    assert not owner_is_dead(owner_with(boot="another-boot", pid="999999999"))
    assert not owner_is_dead(owner_with(namespace="4026531999", pid="999999999"))
    assert not owner_is_dead("old-format-host:1:1")
    assert not owner_is_dead(None)
