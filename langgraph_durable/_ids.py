"""Ids and JSON as Postgres stores them: text without NUL or lone surrogates, ids short
enough to index.

Shared by the checkpoint saver and the run registry: every id and JSON value is checked here
before it is written, so a bad one is a named error and never a driver error
mid-transaction (I8).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from itertools import chain
from typing import Any

import orjson

from langgraph_durable.errors import (
    InvalidInputError,
    InvalidThreadIdError,
    UnserializableValueError,
)

__all__ = [
    "ID_LIMITS",
    "checkpoint_json_text",
    "fits_key",
    "json_text",
    "lone_surrogate",
    "metadata_json_text",
    "storable_text",
    "stored_id",
    "thread_id_of",
]

ID_LIMITS = {
    "thread_id": 1024,
    "checkpoint_ns": 1024,
    "checkpoint_id": 256,
    "task_id": 256,
    "channel": 256,
    "run_id": 1024,
    "worker_id": 1024,
}
"""Longest ids written, in UTF-8 bytes. They are primary-key columns, and a Postgres B-tree
entry holds at most 2,704 bytes: these limits keep every key of the tables within it
(thread + namespace + checkpoint + task + index is at most 2,564 bytes plus headers)."""


def lone_surrogate(text: str) -> int | None:
    """The position of a lone surrogate (text UTF-8 cannot encode), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def is_text(value: object) -> bool:
    """Whether `value` is a string Postgres can store as text: no NUL, no lone surrogate."""
    return isinstance(value, str) and "\x00" not in value and lone_surrogate(value) is None


def storable_text(text: str) -> str:
    """`text` made storable in a text column, for text we only report and never look up
    (an error's message, a status reason): each NUL written as the four characters
    `\\x00` and each lone surrogate as its `\\udcxx` escape (`backslashreplace`).

    Refusing such text is right for ids and inputs (I8), but not for an error a run
    raised: Postgres would refuse the write recording how the run ended, and the run
    would stay `running` with the real error lost.
    """
    if text.isascii() and "\x00" not in text:
        return text  # nearly every message: nothing to replace
    text = text.replace("\x00", "\\x00")
    if lone_surrogate(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _text(value: str, what: str) -> str:
    """Text Postgres can store: no NUL characters, no lone surrogates."""
    if "\x00" in value:
        raise InvalidThreadIdError(f"{what} {value!r} contains a NUL character; remove it.")
    at = lone_surrogate(value)
    if at is not None:
        raise InvalidThreadIdError(
            f"{what} {value!r} is not valid text (a lone surrogate at position {at}); remove it."
        )
    return value


def thread_id_of(value: object, what: str = "thread_id") -> str:
    """Validate a thread id (or namespace, or checkpoint id) the way Postgres will store it.

    Thread ids are stored as TEXT, which cannot hold NUL characters or lone surrogates;
    upstream lets such an id reach the server and fail mid-transaction. Integers and UUIDs
    are accepted as their text.
    """
    if (
        type(value) is str
        and value.isascii()
        and "\x00" not in value
        and (value or what != "thread_id")
    ):
        return value  # most ids: plain ASCII text, checked here (on every put and write)
    if isinstance(value, (bytes, bytearray)) or value is None:
        raise InvalidThreadIdError(f"{what} must be a string, got {type(value).__name__}.")
    text = _text(str(value), what)
    if what == "thread_id" and not text:
        raise InvalidThreadIdError("thread_id is empty; pass configurable.thread_id.")
    return text


def stored_id(value: object, what: str) -> str:
    """An id about to be written: valid text, and short enough for the tables' keys."""
    return fits_key(thread_id_of(value, what), what)


def fits_key(text: str, what: str) -> str:
    """`text`, already valid (`thread_id_of`), if it is short enough for the tables' keys
    (`stored_id` without checking the text again)."""
    limit = ID_LIMITS[what]
    size = len(text.encode("utf-8")) if not text.isascii() else len(text)
    if size > limit:
        raise InvalidThreadIdError(
            f"{what} is {size:,} bytes long; at most {limit:,} UTF-8 bytes fit the checkpoint "
            "tables' keys (a Postgres index entry holds 2,704 bytes). Nothing was written; "
            "use a shorter id, e.g. a hash of a long one."
        )
    return text


# JSON's escape of a NUL character: backslash-u0000 after an even number of backslashes (a
# text holding a backslash followed by "u0000" is stored with the backslash doubled, which
# JSONB takes).
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def holds_nul(json_text: str) -> bool:
    """Whether JSON text holds a NUL (jsonb refuses it): the escape backslash-u0000 after
    an even number of backslashes (the text's own backslashes are written doubled, so
    text holding a backslash followed by "u0000" holds no NUL)."""
    return "\\u0000" in json_text and _ESCAPED_NUL.search(json_text) is not None


_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)
"""One encoder for every call: `json.dumps` with these options builds a new one each time,
and every checkpoint is encoded twice (the checkpoint and its metadata)."""


def json_text(value: object, where: str) -> str:
    """`value` as JSON text a JSONB column takes (no NUL, no lone surrogate, no NaN)."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise UnserializableValueError(
            f"{where} cannot be stored as JSON ({exc}); nothing was written. "
            "Use JSON values there (str, int, float, bool, list, dict)."
        ) from exc
    if holds_nul(text):
        raise InvalidInputError(
            f"{where} contains a NUL character, which Postgres JSONB cannot store; "
            "nothing was written. Remove the NUL character."
        )
    at = lone_surrogate(text)
    if at is not None:
        raise InvalidInputError(
            f"{where} contains a lone surrogate ({text[at]!r}), which is not valid text; "
            "nothing was written. Remove it."
        )
    return text


_EXACT = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
_EXACT |= orjson.OPT_PASSTHROUGH_SUBCLASS
"""Values orjson would write on its own where `json` writes them otherwise or refuses them
(dataclasses, datetimes, subclasses of str, int, dict and list) go to its `default`
instead, which it has none of: it refuses them, and `json_text` takes over."""


def checkpoint_json_text(checkpoint: Mapping[str, Any], where: str) -> str:
    """`json_text` of a checkpoint as `checkpoint_row` stores it, written by orjson: a
    checkpoint's JSON is most of the Python of a step, and orjson writes it about 20
    times faster than `json`.

    orjson writes the same JSON for the values a stored checkpoint holds (ids, timestamps,
    versions, and inline channel values: text, whole numbers, booleans, None and finite
    floats, `_core._is_inline`), except for numbers' spelling (`1e-7` for `1e-07`, the
    same number to JSONB). Anything else takes `json_text`'s path, so the text and the
    errors stay exactly `json_text`'s: a value orjson refuses (a subclass, a big integer,
    a key that is not text, a lone surrogate), versions that are not text or whole
    numbers (orjson would write a NaN as null, and a UUID or an enum where `json`
    refuses them), or an escaped NUL.
    """
    if not _plain_versions(checkpoint):
        return json_text(checkpoint, where)
    try:
        encoded = orjson.dumps(checkpoint, option=_EXACT)
    except TypeError:  # orjson.JSONEncodeError is one
        return json_text(checkpoint, where)
    if b"\\u0000" in encoded:
        return json_text(checkpoint, where)
    return encoded.decode()


def metadata_json_text(metadata: Mapping[str, Any], where: str) -> str:
    """`json_text` of a checkpoint's metadata, written by orjson when every value is plain:
    text, a whole number, a boolean, None, a finite float, or a mapping of text to text
    (`parents`). LangGraph's metadata always is; anything else, and anything orjson
    refuses (a key that is not text, a big integer, a lone surrogate), or an escaped NUL,
    takes `json_text`'s path, so the errors stay its own. The same JSON but for numbers'
    spelling, as in `checkpoint_json_text`."""
    if type(metadata) is dict and _plain_metadata(metadata):
        try:
            encoded = orjson.dumps(metadata, option=_EXACT)
        except TypeError:  # orjson.JSONEncodeError is one
            return json_text(metadata, where)
        if b"\\u0000" not in encoded:
            return encoded.decode()
    return json_text(metadata, where)


_METADATA_SCALARS = frozenset({str, int, bool, type(None)})


def _plain_metadata(metadata: dict[Any, Any]) -> bool:
    for value in metadata.values():
        kind = type(value)
        if kind in _METADATA_SCALARS:
            continue
        if kind is float:
            if not math.isfinite(value):  # orjson would write null where `json` refuses
                return False
        elif kind is not dict or not _TEXT.issuperset(map(type, value.values())):
            return False
    return True


_TEXT = frozenset({str})
_VERSION_TYPES = frozenset({str, int})


def _plain_versions(checkpoint: Mapping[str, Any]) -> bool:
    """Whether every channel version in `checkpoint` is text or a whole number."""
    versions = checkpoint.get("channel_versions")
    seen = checkpoint.get("versions_seen")
    if type(versions) is not dict or type(seen) is not dict:
        return False
    if not _VERSION_TYPES.issuperset(map(type, versions.values())):
        return False
    if not _DICT.issuperset(map(type, seen.values())):
        return False
    # Every node's versions in one pass (a step's checkpoint has one dict per node).
    every_seen = chain.from_iterable(map(dict.values, seen.values()))
    return _VERSION_TYPES.issuperset(map(type, every_seen))


_DICT = frozenset({dict})
