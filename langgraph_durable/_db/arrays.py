"""Array parameters whose Postgres type is known before a statement runs.

A plain Python list sent as a parameter makes psycopg look at its elements on every call
(which type? which array type? how large an int?) and build a new dumper for it: each
`conn.execute` has a fresh cursor, so nothing of that is cached between calls. The hot
statements (a checkpoint with its parked writes, a task's writes) send up to eleven
arrays, and that inspection cost about 2-3 us per array per call. These list subclasses
carry their type instead: they are registered once in psycopg's global adapters map, for
these classes only, with psycopg's own binary dumpers for `text[]`, `bytea[]` and
`int8[]` (the ones it already uses for those types, so nothing else changes).

A connection whose adapters map was made before this module was imported (psycopg copies
the global map when it changes) does not see the registration and dumps these lists as
plain lists: the statements cast every array parameter (`%(x)b::text[]`), so the values
stored are the same, only the call is slower.
"""

from __future__ import annotations

import psycopg
from psycopg.abc import Dumper
from psycopg.pq import Format

__all__ = ["BytesArray", "IntArray", "TextArray"]

_TYPES = psycopg.adapters.types


class TextArray(list[str | None]):
    """A `text[]` parameter."""


class BytesArray(list[bytes | None]):
    """A `bytea[]` parameter."""


class IntArray(list[int | None]):
    """An integer array parameter, sent as `int8[]`: a statement casting it to `int[]` fails
    on a value outside 32 bits (an `int4` dumper would silently keep the low 32 bits)."""


def _dumper(name: str) -> type[Dumper]:
    """psycopg's own binary dumper for arrays of `name`: its element and array types are
    fixed, so psycopg skips the inspection of the elements."""
    return psycopg.adapters.get_dumper_by_oid(_TYPES[name].array_oid, Format.BINARY)


psycopg.adapters.register_dumper(TextArray, _dumper("text"))
psycopg.adapters.register_dumper(BytesArray, _dumper("bytea"))
psycopg.adapters.register_dumper(IntArray, _dumper("int8"))
