"""Array parameters whose Postgres type is known before a statement runs.

A plain Python list sent as a parameter makes psycopg look at its elements on every call
(which type? which array type? how large an int?) and build a new dumper for it: each
`conn.execute` has a fresh cursor, so nothing of that is cached between calls. The hot
statements (a checkpoint with its parked writes, a task's writes) send up to eleven
arrays, and that inspection cost about 2-3 us per array per call. These list subclasses
carry their type instead; their dumpers are registered once, for these classes only, in
psycopg's global adapters map, so every connection made by anyone finds them and no other
type is touched.

Where a connection does not see the registration (its adapters were copied before this
module was imported, then changed), psycopg falls back to the dumper of `list`: the same
bytes, only slower.
"""

from __future__ import annotations

import psycopg
from psycopg.types.array import ListBinaryDumper

__all__ = ["BytesArray", "IntArray", "TextArray"]

_TYPES = psycopg.adapters.types


class TextArray(list[str | None]):
    """A `text[]` parameter."""


class BytesArray(list[bytes | None]):
    """A `bytea[]` parameter."""


class IntArray(list[int | None]):
    """An integer array parameter, sent as `int8[]`: a statement casting it to `int[]` fails
    on a value outside 32 bits (an `int4` dumper would silently keep the low 32 bits)."""


def _dumper(name: str) -> type[ListBinaryDumper]:
    """A binary array dumper whose element and array types are fixed: psycopg skips the
    inspection of the elements when a dumper already has its `oid`."""
    info = _TYPES[name]
    return type(
        f"{name.capitalize()}ArrayDumper",
        (ListBinaryDumper,),
        {"oid": info.array_oid, "element_oid": info.oid},
    )


psycopg.adapters.register_dumper(TextArray, _dumper("text"))
psycopg.adapters.register_dumper(BytesArray, _dumper("bytea"))
psycopg.adapters.register_dumper(IntArray, _dumper("int8"))
