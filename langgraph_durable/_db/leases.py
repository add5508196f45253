"""Who holds a lease, and whether that process still runs: for effect attempts and runs.

An owner is `host:pid:start:boot:pidns`: the pid's start time in clock ticks (so a pid the
system gave to a later process is not taken for the owner), the boot id, and the pid
namespace. A process is judged dead only by a checker on the same host, in the same boot
and the same pid namespace (two containers may share a hostname but not their pids):
gone, reused, or a zombie not yet reaped by its parent. Any other owner cannot be checked,
and its lease runs out.
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache

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


@lru_cache(maxsize=1)
def _machine() -> tuple[str, str, str]:
    """(host, boot id, pid namespace) of this process; "" where the system does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as found:
            boot = found.read().strip()
    except OSError:
        boot = ""
    try:
        namespace = os.readlink("/proc/self/ns/pid").rsplit("[", 1)[-1].rstrip("]")
    except OSError:
        namespace = ""
    return socket.gethostname(), boot, namespace


def process_owner() -> str:
    """This process as a lease owner: `host:pid:start:boot:pidns`."""
    host, boot, namespace = _machine()
    return f"{host}:{os.getpid()}:{_process_start()}:{boot}:{namespace}"


def owner_is_dead(owner: str | None) -> bool:
    """Whether a lease owner is a process this checker can see, and it runs no code any more.

    Only an owner of this host, this boot and this pid namespace can be judged; for any
    other (another machine, a container sharing the hostname) this says False.
    """
    if not owner:
        return False
    parts = owner.split("#", 1)[0].split(":")  # "#..." tags one call of the process
    if len(parts) != 5:
        return False
    host, pid_text, started, boot, namespace = parts
    if (host, boot, namespace) != _machine() or not boot or not namespace:
        return False
    if not pid_text.isdigit():
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
