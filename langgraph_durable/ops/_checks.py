"""What `doctor` concludes from a server's settings and the registry's counts: pure.

Each finding says what it saw and, where it is not fine, what to change. The settings
that matter most are the ones that decide whether a committed step survives a crash of
the server: a step the saver committed under `fsync = off` can be lost by a power cut,
and under `synchronous_commit = off` by a crash of Postgres itself, which no
durability mode of ours can make up for: both fail. So does a role without the
privileges an application needs, since every run would then fail. Warnings name what
works but needs a look.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Finding",
    "judge_privileges",
    "judge_registry",
    "judge_settings",
    "judge_value_compression",
    "refused_to_role",
    "summary",
]

Level = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Finding:
    """One check: its name, what was seen, how it stands, and what to do."""

    check: str
    level: Level
    seen: str
    advice: str = ""


def judge_settings(settings: Mapping[str, str], connections: int) -> list[Finding]:
    """Findings on the server settings that decide durability, and on connection room."""
    found: list[Finding] = []

    def add(check: str, ok: bool, seen: str, advice: str, level: Level = "warn") -> None:
        found.append(Finding(check, "ok" if ok else level, seen, "" if ok else advice))

    version = int(settings.get("server_version_num", "0"))
    add(
        "server version",
        version >= 130000,
        settings.get("server_version", "?"),
        "PostgreSQL 13 or newer is needed.",
        "fail",
    )
    add(
        "fsync",
        settings.get("fsync") == "on",
        f"fsync = {settings.get('fsync')}",
        "A power cut can lose committed steps and effect journal rows: set fsync = on.",
        "fail",
    )
    commit = settings.get("synchronous_commit", "on")
    add(
        "synchronous_commit",
        commit != "off",
        f"synchronous_commit = {commit}",
        "A server crash can lose committed steps (checkpoints of durability='sync' "
        "included; only the effect journal forces its own commits on): set it to on "
        "(ALTER DATABASE / ALTER ROLE ... RESET synchronous_commit, or postgresql.conf).",
        "fail",
    )
    add(
        "full_page_writes",
        settings.get("full_page_writes", "on") == "on",
        f"full_page_writes = {settings.get('full_page_writes')}",
        "A crash can leave torn pages: set full_page_writes = on.",
    )
    wal = settings.get("wal_level", "replica")
    add(
        "wal_level",
        wal != "minimal",
        f"wal_level = {wal}",
        "No replicas or point-in-time recovery are possible: set wal_level = replica.",
    )
    limit = int(settings.get("max_connections", "100"))
    reserved = int(settings.get("superuser_reserved_connections", "3"))
    room = limit - reserved
    add(
        "connections",
        connections <= 0.8 * room,
        f"{connections} of {room} in use",
        "Fewer than 20% of the connections are left: workers and pools wait for one; "
        "lower pool sizes or raise max_connections.",
    )
    for name in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"):
        value = settings.get(name, "0")
        unit = settings.get(f"{name}:unit", "ms")
        found.append(
            Finding(
                name,
                "ok",
                f"{name} = {value}{unit if value != '0' else ''}",
                "",
            )
        )
    isolation = settings.get("default_transaction_isolation", "read committed")
    add(
        "default_transaction_isolation",
        isolation == "read committed",
        f"default_transaction_isolation = {isolation}",
        "The saver and the registry are written for read committed; under a stricter "
        "level some writes fail with serialization errors and are retried.",
    )
    return found


def judge_registry(counts: Mapping[str, Any]) -> list[Finding]:
    """Findings on what waits for a person: stuck and blocked runs, unknown effects (a
    running attempt whose lease lapsed counted among them, `lapsed_effects` of them)."""
    stuck, blocked = int(counts["stuck_runs"]), int(counts["blocked_runs"])
    unknown, workers = int(counts["unknown_effects"]), int(counts["live_workers"])
    lapsed = int(counts.get("lapsed_effects", 0))
    lapsed_seen = f" ({lapsed} running with a lapsed lease)" if lapsed else ""
    return [
        Finding(
            "stuck runs",
            "ok" if stuck == 0 else "warn",
            f"{stuck} stuck",
            "" if stuck == 0 else "See `langgraph-durable stuck`.",
        ),
        Finding(
            "blocked runs",
            "ok" if blocked == 0 else "warn",
            f"{blocked} blocked",
            "" if blocked == 0 else "See `langgraph-durable runs list --status blocked`.",
        ),
        Finding(
            "unknown effects",
            "ok" if unknown == 0 else "warn",
            f"{unknown} with an unknown outcome{lapsed_seen}",
            "" if unknown == 0 else "Resolve them: `langgraph-durable effects list`.",
        ),
        Finding("workers", "ok", f"{workers} live", ""),
    ]


def judge_value_compression(lz4_available: bool, not_lz4: list[str]) -> Finding:
    """How the checkpoint values are compressed. `setup()` makes them lz4 where the server
    has it (pglz cost more than the rest of a put for large values and message lists); a
    database set up on a server without lz4 and moved to one with it, or restored with
    `pg_dump --no-toast-compression`, keeps pglz until someone sets it."""
    if not lz4_available:
        return Finding("value compression", "ok", "pglz (this server has no lz4)")
    if not not_lz4:
        return Finding("value compression", "ok", "lz4")
    statements = "; ".join(
        "ALTER TABLE {} ALTER COLUMN {} SET COMPRESSION lz4".format(*name.split("."))
        for name in not_lz4
    )
    return Finding(
        "value compression",
        "warn",
        f"not lz4: {', '.join(not_lz4)}",
        "Large values and long message lists are stored 2-4x faster with lz4 "
        f"(README, 'Values compressed with lz4'): {statements}. If pglz was chosen for "
        "its smaller size, leave it.",
    )


def judge_privileges(role: str, missing: list[str], no_usage: Sequence[str] = ()) -> Finding:
    """Whether this role may do what an application does with the rows (the privileges
    `grant_app_role` gives): without them every run fails with `permission denied`.
    `no_usage`: schemas holding the tables that this role may not use (then the tables
    are not found at all, and no table privilege reads as missing)."""
    if no_usage:
        schemas = ", ".join(no_usage)
        return Finding(
            "privileges",
            "fail",
            f"{role} lacks USAGE on schema {schemas}, where the tables are",
            "Runs as this role do not find the tables. As their owner run "
            f"`langgraph-durable grant {role} --schema {no_usage[0]}` (`--print` shows the "
            "GRANT statements).",
        )
    if not missing:
        return Finding("privileges", "ok", f"{role} has what an application needs")
    shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    return Finding(
        "privileges",
        "fail",
        f"{role} lacks {shown}",
        "Runs as this role fail with `permission denied`. As the owner of the tables run "
        f"`langgraph-durable grant {role}` (`--print` shows the GRANT statements).",
    )


def refused_to_role(findings: list[Finding], role: str, said: str | None) -> list[Finding]:
    """`findings` once Postgres refused this role a read of our own tables (a role without
    the grants, or without USAGE on their schema, which the privileges check cannot see):
    the privileges check fails, naming the role and `grant`, and what could not be read is
    said not checked."""
    said = said or "permission denied"
    not_checked = Finding(
        "registry" if any(f.check == "schema" for f in findings) else "schema",
        "warn",
        "not checked: this role may not read the tables",
        f"Postgres said: {said}. See the privileges finding.",
    )
    kept = [f for f in findings if not (f.check == "privileges" and f.level == "ok")]
    if len(kept) == len(findings):  # the privileges check had failed already
        return [*kept, not_checked]
    refused = Finding(
        "privileges",
        "fail",
        f"{role} was refused a read of the tables ({said})",
        "Runs as this role fail with `permission denied`. As the owner of the tables run "
        f"`langgraph-durable grant {role}` (`--print` shows the GRANT statements).",
    )
    return [*kept, refused, not_checked]


def summary(findings: list[Finding]) -> tuple[int, int]:
    """How many findings fail, and how many warn."""
    levels = [f.level for f in findings]
    return levels.count("fail"), levels.count("warn")
