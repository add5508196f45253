"""Who holds a lease, and whether that process still runs: for effect attempts and runs.

An owner is `host:pid:start`, the start time in clock ticks from /proc (Linux), so that a
pid the system gave to a later process is not taken for the owner. On the owner's own host
a dead process (gone, reused, or a zombie not yet reaped by its parent) is known at once;
owners on other hosts cannot be checked, and their leases run out.
"""

from __future__ import annotations

import os
import socket

__all__ = ["owner_is_dead", "process_owner"]


def _stat_fields(pid: str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_start() -> str:
    fields = _stat_fields(str(os.getpid()))
    return fields[19] if fields and len(fields) > 19 else "0"


def process_owner() -> str:
    """This process as a lease owner: `host:pid:start`."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start()}"


def owner_is_dead(owner: str | None) -> bool:
    """Whether a lease owner on this host is a process that no longer runs code."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    fields = _stat_fields(pid_text)
    if fields is not None and len(fields) > 19:
        # fields[0] is the state: Z (zombie) and X (dead) run no code any more.
        return fields[0] in ("Z", "X") or fields[19] != started
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return started != "0"
