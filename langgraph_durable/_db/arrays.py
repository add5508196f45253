"""Array parameters whose Postgres type is known before a statement runs.

A plain Python list sent as a parameter makes psycopg look at its elements on every call
(which type? which array type? how large an int?) and build a new dumper for it: each
`conn.execute` has a fresh cursor, so nothing of that is cached between calls. The hot
statements (a checkpoint with its parked writes, a task's writes) send up to eleven
arrays, and that inspection cost about 2-3 us per array per call. These list subclasses
carry their type instead, and are registered once in psycopg's global adapters map, for
these classes only, with dumpers of their own: one pass over a one-dimensional list into
Postgres' binary array format, the bytes psycopg's own list dumper writes (about 3.5 us
per array there, in Python too: it works out the dimensions and looks up a dumper per
element; `tests/unit/test_arrays.py` compares the bytes).

A connection whose adapters map was made before this module was imported (psycopg copies
the global map when it changes) does not see the registration and dumps these lists as
plain lists: the statements cast every array parameter (`%(x)b::text[]`), so the values
stored are the same, only the call is slower.
"""

from __future__ import annotations

import struct
from typing import Any

import psycopg
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Dumper
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


_HEADER = struct.Struct("!iiiii")  # dimensions, has NULLs, element oid, length, lower bound
_EMPTY = struct.Struct("!iii")  # no dimensions, no NULLs, element oid
_LENGTH = struct.Struct("!i").pack
_NULL = _LENGTH(-1)
_INT8 = struct.Struct("!q").pack


class _ArrayDumper(Dumper):
    """A one-dimensional list in Postgres' binary array format (`array_send`'s).

    The array's oid is set per instance, not on the class: psycopg registers a dumper class
    with a fixed oid as the dumper of that oid too, for every application in the process
    (`get_dumper_by_oid`), and these dumpers are only for our own classes."""

    format = Format.BINARY
    array_oid = 0
    element_oid = 0

    def __init__(self, cls: type, context: AdaptContext | None = None) -> None:
        super().__init__(cls, context)
        self.oid = self.array_oid

    def dump(self, obj: Any) -> Buffer:
        if not obj:
            return _EMPTY.pack(0, 0, self.element_oid)
        parts: list[Buffer] = [b""]
        has_null = 0
        for item in obj:
            if item is None:
                parts.append(_NULL)
                has_null = 1
            else:
                data = self.element(item)
                parts.append(_LENGTH(len(data)))
                parts.append(data)
        parts[0] = _HEADER.pack(1, has_null, self.element_oid, len(obj), 1)
        return b"".join(parts)

    def element(self, item: Any) -> Buffer:
        """One element's bytes (a large value is not copied: `join` copies it once)."""
        raise NotImplementedError


class _TextArrayDumper(_ArrayDumper):
    array_oid = _TYPES["text"].array_oid
    element_oid = _TYPES["text"].oid

    def __init__(self, cls: type, context: AdaptContext | None = None) -> None:
        super().__init__(cls, context)
        # The client encoding, as psycopg's own text dumpers use it.
        self._encoding = self.connection.info.encoding if self.connection else "utf-8"

    def element(self, item: Any) -> Buffer:
        data: bytes = item.encode(self._encoding)
        return data


class _BytesArrayDumper(_ArrayDumper):
    array_oid = _TYPES["bytea"].array_oid
    element_oid = _TYPES["bytea"].oid

    def element(self, item: Any) -> Buffer:
        data: Buffer = item
        return data


class _IntArrayDumper(_ArrayDumper):
    array_oid = _TYPES["int8"].array_oid
    element_oid = _TYPES["int8"].oid

    def element(self, item: Any) -> Buffer:
        try:
            return _INT8(item)
        except struct.error as exc:  # what psycopg raises for an int beyond 64 bits
            raise OverflowError(f"int too big to convert to int8: {item}") from exc


psycopg.adapters.register_dumper(TextArray, _TextArrayDumper)
psycopg.adapters.register_dumper(BytesArray, _BytesArrayDumper)
psycopg.adapters.register_dumper(IntArray, _IntArrayDumper)
