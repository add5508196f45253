# WARNING: generated from _adoctor.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""`doctor`: can we reach the database, is its schema ours, will committed steps survive?

Generated from the async source; edit that file, not this one.
"""

from __future__ import annotations

import builtins

import psycopg

from langgraph_durable._db import source_of
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.errors import ConfigurationError, SchemaError
from langgraph_durable.ops._checks import (
    Finding,
    judge_privileges,
    judge_registry,
    judge_settings,
    judge_value_compression,
    refused_to_role,
)
from langgraph_durable.ops._history import checked_saver
from langgraph_durable.roles import app_role_privileges

__all__ = ["doctor"]


def doctor(saver: DurablePostgresSaver, *, live_seconds: float = 90.0) -> builtins.list[Finding]:
    """Every finding on the saver's database, each "ok", "warn" or "fail": the server's
    durability settings, the privileges of the saver's role, the schema, value
    compression, and what waits for a person.

    Raises:
        DatabaseUnreachableError: The database cannot be reached (the one finding that
            stops the others).
    """
    source = source_of(checked_saver(saver, DurablePostgresSaver))
    with source.connection("reading the server settings (doctor)") as conn:
        cur = conn.execute(QUERIES["doctor_settings"])
        settings: dict[str, str] = {}
        for row in cur.fetchall():
            settings[row["name"]] = row["setting"]
            settings[f"{row['name']}:unit"] = row["unit"] or ""
        cur = conn.execute(QUERIES["doctor_connections"])
        connections = int((cur.fetchone() or {"connections": 0})["connections"])
        kinds, names, privileges = zip(*app_role_privileges(), strict=True)
        cur = conn.execute(
            QUERIES["doctor_privileges"],
            {"kinds": list(kinds), "names": list(names), "privileges": list(privileges)},
        )
        granted = cur.fetchone()
    assert granted is not None
    findings = judge_settings(settings, connections)
    findings.append(judge_privileges(granted["role"], granted["missing"], granted["no_usage"]))
    try:
        _read_our_tables(saver, settings, live_seconds, findings)
    except ConfigurationError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        # Reading our own tables was refused: a finding, not the end of the report.
        return refused_to_role(findings, granted["role"], exc.__cause__.diag.message_primary)
    return findings


def _read_our_tables(
    saver: DurablePostgresSaver,
    settings: dict[str, str],
    live_seconds: float,
    findings: builtins.list[Finding],
) -> None:
    """Add the findings read from our own tables: the schema, compression, the registry."""
    source = source_of(saver)
    try:
        saver.check_schema()
    except SchemaError as exc:
        findings.append(Finding("schema", "fail", "not ready", str(exc)))
        return
    findings.append(Finding("schema", "ok", "up to date"))
    with source.connection("counting what needs a person (doctor)") as conn:
        if int(settings.get("server_version_num", "0")) >= 140000:
            cur = conn.execute(QUERIES["doctor_value_compression"])
            compression = cur.fetchone()
            assert compression is not None
            findings.append(
                judge_value_compression(compression["lz4_available"], compression["not_lz4"])
            )
        cur = conn.execute(QUERIES["doctor_registry"], {"live_seconds": live_seconds})
        counts = cur.fetchone()
    assert counts is not None
    findings.extend(judge_registry(counts))
