"""Array parameters with a known Postgres type (`_db.arrays`) reach the server as the same
values a plain list would, and psycopg uses their fixed dumpers, not the list inspection:
ours, which write the bytes psycopg's own dumper for that array type writes."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psycopg
import pytest
from psycopg.adapt import PyFormat
from psycopg.pq import Format

from langgraph_durable._db import CONNECTION_KWARGS, BytesArray, IntArray, TextArray

CASES: list[tuple[Any, str]] = [
    (TextArray(["a", "", "ünïcödé ✓", None, "x" * 10_000]), "text[]"),
    (TextArray(), "text[]"),
    (BytesArray([b"", b"\x00\xff" * 100, None]), "bytea[]"),
    (BytesArray(), "bytea[]"),
    (IntArray([0, -3, 2**31 - 1, -(2**31), None]), "int[]"),
    (IntArray(), "int[]"),
]


@pytest.mark.parametrize(("value", "cast"), CASES)
def test_typed_arrays_round_trip(db_dsn: str, value: Any, cast: str) -> None:
    with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn:
        query = "SELECT %(a)b::" + cast + " AS plain, %(b)b::" + cast + " AS typed"
        row = conn.execute(query, {"a": list(value), "b": value}).fetchone()  # type: ignore[arg-type]
    assert row is not None
    assert row["typed"] == row["plain"] == list(value)


def test_typed_arrays_use_their_own_dumpers(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn:
        types = conn.adapters.types
        for cls, name in ((TextArray, "text"), (BytesArray, "bytea"), (IntArray, "int8")):
            found = conn.adapters.get_dumper(cls, PyFormat.BINARY)
            dumper = found(cls, conn)
            assert dumper.oid == types[name].array_oid, cls
            assert dumper.element_oid == types[name].oid, cls  # type: ignore[attr-defined]
            # `%s` (the effect journal's seen statuses) picks it too.
            assert conn.adapters.get_dumper(cls, PyFormat.AUTO) is found


@pytest.mark.parametrize(("value", "cast"), CASES)
def test_typed_arrays_write_the_bytes_psycopg_writes(db_dsn: str, value: Any, cast: str) -> None:
    """psycopg's own binary dumper for the array type (`get_dumper_by_oid`) is the reference:
    the same header, lengths, NULL markers and element bytes."""
    with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn:
        oid = conn.adapters.types[cast.removesuffix("[]").replace("int", "int8")].array_oid
        theirs = conn.adapters.get_dumper_by_oid(oid, Format.BINARY)(list, conn)
        ours = conn.adapters.get_dumper(type(value), PyFormat.BINARY)(type(value), conn)
        assert bytes(ours.dump(value)) == bytes(theirs.dump(list(value)))  # type: ignore[arg-type]


def test_a_text_array_is_written_in_the_client_encoding(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn:
        conn.execute("SET client_encoding TO 'LATIN1'")
        row = conn.execute("SELECT %(a)b::text[] AS a", {"a": TextArray(["café", None])}).fetchone()
    assert row == {"a": ["café", None]}


def test_typed_text_arrays_compare_in_the_default_format(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn:
        row = conn.execute(
            "SELECT 'running'::text = ANY(%(seen)s) AS found", {"seen": TextArray(["running"])}
        ).fetchone()
    assert row == {"found": True}


@pytest.mark.parametrize("too_big", [2**31, -(2**31) - 1, 2**63])
def test_an_int_outside_int4_is_refused_not_truncated(db_dsn: str, too_big: int) -> None:
    """Sent as int8[] and cast by the statement: the server refuses what does not fit (an
    int4 dumper would keep the low 32 bits without a word)."""
    refused = (psycopg.errors.NumericValueOutOfRange, OverflowError)
    with psycopg.connect(db_dsn, **CONNECTION_KWARGS) as conn, pytest.raises(refused):
        conn.execute("SELECT %(a)b::int[]", {"a": IntArray([1, too_big])})


SNAPSHOT = """
import psycopg
from psycopg.adapt import PyFormat
from psycopg.pq import Format

def dumpers():
    a = psycopg.adapters
    by_class = [a.get_dumper(c, f) for c in (list, str, bytes, int) for f in PyFormat]
    by_oid = [
        a.get_dumper_by_oid(getattr(a.types[n], kind), Format.BINARY)
        for n in ("text", "bytea", "int4", "int8")
        for kind in ("oid", "array_oid")
    ]
    return [f"{d.__module__}.{d.__qualname__}" for d in by_class + by_oid]

before = dumpers()
import langgraph_durable  # registers the typed arrays
assert dumpers() == before, (before, dumpers())
print("unchanged")
"""


def test_registering_the_typed_arrays_changes_no_other_dumper() -> None:
    """The registration is global to psycopg: every other application's lists, strings,
    bytes and ints, and every dumper chosen by type, must be dumped as before."""
    done = subprocess.run(
        [sys.executable, "-c", SNAPSHOT], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "unchanged"
