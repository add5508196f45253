"""The pure core: validation, row building and history assembly, without a database."""

from __future__ import annotations

import datetime
import enum
import json
import math
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import (
    InvalidInputError,
    InvalidThreadIdError,
    UnserializableValueError,
    _ids,
)
from langgraph_durable._fencing import Fence, with_fence
from langgraph_durable._sql import MIGRATIONS, QUERIES, parse_queries
from langgraph_durable.checkpoint import _core

SERDE = JsonPlusSerializer()


def config(thread: Any = "t", ns: str = "", checkpoint_id: str | None = None) -> Any:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


@pytest.mark.parametrize("bad", ["a\x00b", "", None, b"bytes"])
def test_bad_thread_ids_are_rejected(bad: Any) -> None:
    with pytest.raises(InvalidThreadIdError):
        _core.target(config(bad))


def test_missing_thread_id_says_what_to_pass() -> None:
    with pytest.raises(InvalidThreadIdError, match="thread_id"):
        _core.target({"configurable": {}})


def test_integer_thread_ids_are_stored_as_text() -> None:
    assert _core.target(config(42)) == ("42", "", None)


def test_versions_keep_upstream_format_and_order() -> None:
    first = _core.next_version(None)
    second = _core.next_version(first)
    assert first.startswith("0" * 31 + "1.")
    assert second > first
    assert _core.next_version(7).startswith(f"{8:032}.")


def test_values_that_json_cannot_hold_go_to_blobs() -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {
        "plain": "text",
        "nul": "a\x00b",
        "nan": math.nan,
        "number": 3,
        "object": {"a": 1},
    }
    row, blobs = _core.checkpoint_row(config(), checkpoint, {})
    assert set(blobs) == {"nul", "nan", "object"}
    assert '"plain":"text"' in row["checkpoint"]
    assert "\\u0000" not in row["checkpoint"]


def test_without_inline_values_plain_text_goes_to_blobs_too() -> None:
    """An encrypting serializer keeps every value out of the checkpoint's JSON, plain ASCII
    text included (the common case `checkpoint_row` checks first)."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"plain": "text", "number": 3, "object": {"a": 1}}
    row, blobs = _core.checkpoint_row(config(), checkpoint, {}, inline_values=False)
    assert set(blobs) == {"plain", "number", "object"}
    assert "text" not in row["checkpoint"]


def test_unserializable_values_name_their_channel() -> None:
    with pytest.raises(UnserializableValueError, match="'lock'"):
        _core.blob_params(SERDE, {"lock": threading.Lock()}, {"lock": "1"})


def test_unserializable_writes_name_channel_and_task() -> None:
    with pytest.raises(UnserializableValueError, match="'ch' by task task-1"):
        _core.write_params(
            SERDE, config(checkpoint_id="c1"), [("ch", threading.Lock())], "task-1", ""
        )


def test_metadata_with_nul_is_rejected_before_writing() -> None:
    with pytest.raises(InvalidInputError, match="NUL"):
        _core.checkpoint_row(config(), empty_checkpoint(), {"nested": {"x": "a\x00"}})  # type: ignore[typeddict-unknown-key]


def test_put_writes_needs_a_checkpoint_id() -> None:
    with pytest.raises(InvalidInputError, match="checkpoint_id"):
        _core.write_key(config())


def test_special_writes_replace_and_take_fixed_indexes() -> None:
    writes = [("__interrupt__", 1)]
    params = _core.write_params(SERDE, config(checkpoint_id="c"), writes, "t", "")
    assert _core.replaces_earlier(writes)
    assert not _core.replaces_earlier([("__interrupt__", 1), ("ch", 2)])
    assert params["idxs"] == [-3]


def test_write_indexes_are_plain_ints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The indexes go to the server as a binary array, which psycopg sizes by the last
    element of an int subclass's list: 70000 then 7 would be stored as 4464, 7."""

    class Index(enum.IntEnum):
        BIG = 70000
        SMALL = 7

    monkeypatch.setitem(_core.WRITES_IDX_MAP, "__big__", Index.BIG)
    monkeypatch.setitem(_core.WRITES_IDX_MAP, "__small__", Index.SMALL)
    writes = [("__big__", 1), ("__small__", 2)]
    params = _core.write_params(SERDE, config(checkpoint_id="c"), writes, "t", "")
    assert params["idxs"] == [70000, 7]
    assert [type(idx) for idx in params["idxs"]] == [int, int]


def test_delta_history_orders_oldest_checkpoint_first_then_by_task_path() -> None:
    def write(depth: int, path: str, value: int) -> dict[str, Any]:
        type_, blob = SERDE.dumps_typed(value)
        return {
            "kind": "w", "depth": depth, "checkpoint_id": f"c{depth}", "channel": "ch",
            "type": type_, "blob": blob, "task_id": f"task{value}", "task_path": path,
            "idx": 0, "inline": None,
        }  # fmt: skip

    seed_type, seed_blob = SERDE.dumps_typed([0])
    rows = [
        write(1, "b", 4),
        write(2, "a", 1),
        write(1, "a", 3),
        write(2, "b", 2),
        {
            "kind": "s", "depth": 2, "checkpoint_id": "c2", "channel": "ch", "type": seed_type,
            "blob": seed_blob, "task_id": None, "task_path": None, "idx": None, "inline": None,
        },
    ]  # fmt: skip
    history = _core.assemble_delta_history(SERDE, ["ch", "other"], rows)
    assert [w[2] for w in history["ch"]["writes"]] == [1, 2, 3, 4]
    assert history["ch"]["seed"] == [0]
    assert history["other"] == {"writes": []}


def test_queries_file_has_unique_names_and_parses() -> None:
    assert "put_checkpoint" in QUERIES
    with pytest.raises(ValueError, match="duplicate"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_migrations_are_numbered_without_gaps() -> None:
    for series in ("upstream", "durable"):
        versions = [m.version for m in MIGRATIONS if m.series == series]
        start = 0 if series == "upstream" else 1
        assert versions == list(range(start, start + len(versions)))


def test_writes_under_a_fencing_token_get_the_token_lookup() -> None:
    """The statement a task's writes get follows their config: a lease's token is looked
    up, writes without one skip the lookup."""
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}}
    fenced = _core.writes_statement(with_fence(config, Fence(7, "run")), [("a", 1)], events=False)
    assert "t.fencing_token = %(fence_token)s::bigint" in fenced
    plain = _core.writes_statement(config, [("a", 1)], events=False)
    assert "langgraph_durable_threads" not in plain


class _Text(str):
    pass


class _Level(enum.IntEnum):
    HIGH = 3


def test_channel_values_of_subclasses_are_placed_like_their_base() -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {
        "text": _Text("plain"),
        "text_nul": _Text("a\x00b"),
        "level": _Level.HIGH,
        "flag": True,
        "none": None,
        "inf": math.inf,
        "half": 0.5,
    }
    row, blobs = _core.checkpoint_row(config(), checkpoint, {})
    assert set(blobs) == {"text_nul", "inf"}
    assert '"text":"plain"' in row["checkpoint"]
    assert '"half":0.5' in row["checkpoint"]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("a\ud800b", "Channel 'bad'"),
        (_Text("a\ud800b"), "Channel 'bad'"),
        ({"ok": "é", "answer": "a\udc00"}, "Channel 'bad' \\(key 'answer'\\)"),
    ],
    ids=["str", "str-subclass", "in-a-dict"],
)
def test_lone_surrogates_in_channel_values_name_the_channel(value: Any, named: str) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"fine": "é", "bad": value}
    with pytest.raises(UnserializableValueError, match=named):
        _core.checkpoint_row(config(), checkpoint, {})


def test_lone_surrogates_in_writes_name_channel_and_task() -> None:
    with pytest.raises(UnserializableValueError, match="'ch' by task task-1 is a string"):
        _core.write_params(SERDE, config(checkpoint_id="c1"), [("ch", "x\ud800")], "task-1", "")


def test_secret_sounding_metadata_is_redacted_unless_allowed() -> None:
    metadata = {"api_key": "k", "user": "ann", "Session_Token": "s"}
    assert _core.DEFAULT_REDACTION.apply(metadata) == {
        "api_key": _core.REDACTED,
        "user": "ann",
        "Session_Token": _core.REDACTED,
    }
    allowing = _core.MetadataRedaction(allow=frozenset({"api_key"}))
    assert allowing.apply(metadata)["api_key"] == "k"
    own_rule = _core.MetadataRedaction(redact=lambda key, value: value == "ann")
    assert own_rule.apply(metadata) == {
        "api_key": "k",
        "user": _core.REDACTED,
        "Session_Token": "s",
    }


# Counts and limits that merely mention tokens (what model settings and usage put in
# `configurable` or metadata) must stay filterable; credentials must not reach clear text.
TOKEN_COUNTS_AND_LIMITS = [
    "max_tokens",
    "token_count",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "num_tokens",
    "tokens",
    "token_usage",
    "prompt_tokens",
    "completion_tokens",
    "max_new_tokens",
    "token_limit",
    "token_budget",
    "maxTokens",
    "MAX_TOKENS",
    "llm.max-tokens",
    "input_token_details",
    "completion_tokens_details",
    "x-ratelimit-reset-tokens",
]
SECRETS = [
    "token",
    "reset_token",
    "password_reset_token",
    "reset_tokens",
    "token_details",
    "github_token_details",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "session_token",
    "Session_Token",
    "accessToken",
    "githubtoken",
    "github_token",
    "api_tokens",
    "new_token",
    "api_key",
    "apikey",
    "x-api-key",
    "OPENAI_API_KEY",
    "secret",
    "client_secret",
    "aws_secret_access_key",
    "password",
    "db_password",
    "passwd",
    "passphrase",
    "authorization",
    "bearer",
    "private_key",
    "credentials",
    "credential",
    "cookie",
    "access_key",
]


@pytest.mark.parametrize("key", TOKEN_COUNTS_AND_LIMITS)
def test_token_counts_and_limits_are_kept(key: str) -> None:
    assert _core.DEFAULT_REDACTION.apply({key: 500}) == {key: 500}


@pytest.mark.parametrize("key", SECRETS)
def test_secrets_are_redacted(key: str) -> None:
    assert _core.DEFAULT_REDACTION.apply({key: "s3cr3t"}) == {key: _core.REDACTED}


@pytest.mark.parametrize(
    "value",
    [{"a": "é", "b": [1, 2.5, None, True]}, {"z": 1, "a": 2}, ["x", {"n": -0.0}]],
)
def test_json_text_matches_json_dumps_with_the_same_options(value: Any) -> None:
    expected = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    assert _ids.json_text(value, "value") == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"score": math.nan}, UnserializableValueError),
        ({"k": "a\ud800"}, InvalidInputError),
        ({"k": "a\x00b"}, InvalidInputError),
    ],
    ids=["nan", "lone-surrogate", "nul"],
)
def test_json_text_refuses_what_jsonb_cannot_hold(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        _ids.json_text(value, "metadata")


def test_a_channel_value_with_nul_and_a_lone_surrogate_is_refused() -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"bad": "a\x00\ud800"}
    with pytest.raises(UnserializableValueError, match="Channel 'bad'"):
        _core.checkpoint_row(config(), checkpoint, {})


def test_a_fetched_tuple_is_named_by_the_read_columns_and_must_match_them() -> None:
    values = tuple(f"value of {name}" for name in _core.TUPLE_COLUMNS)
    row = _core.tuple_row_of(values)
    assert list(row) == list(_core.TUPLE_COLUMNS)
    assert row["checkpoint_id"] == "value of checkpoint_id"
    with pytest.raises(ValueError, match="zip"):  # a statement with another column count
        _core.tuple_row_of((*values, "extra"))


def _same_json_by_orjson(
    fast: Callable[[Any, str], str], value: Any, same_text: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fast` writes `value` without calling json_text, as json would: the same text, or
    (`same_text` False) the same JSON with numbers spelled otherwise."""
    expected = _ids.json_text(value, "value")

    def not_called(value: Any, where: str) -> str:
        raise AssertionError("json_text was called")

    monkeypatch.setattr(_ids, "json_text", not_called)
    written = fast(value, "value")
    assert json.loads(written) == json.loads(expected)
    assert (written == expected) is same_text


def _same_as_json_text(fast: Callable[[Any, str], str], value: Any) -> None:
    """`fast` gives json_text's text, or raises its error."""
    try:
        expected: str | type[Exception] = _ids.json_text(value, "value")
    except (InvalidInputError, UnserializableValueError) as exc:
        expected = type(exc)
    if isinstance(expected, str):
        assert fast(value, "value") == expected
    else:
        with pytest.raises(expected):
            fast(value, "value")


def _checkpoint_of(values: dict[str, Any], **fields: Any) -> dict[str, Any]:
    checkpoint: dict[str, Any] = dict(empty_checkpoint())
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {name: f"{i:032}.0.5" for i, name in enumerate(values)}
    checkpoint["versions_seen"] = {"node": dict(checkpoint["channel_versions"])}
    return {**checkpoint, **fields}


@pytest.mark.parametrize(
    ("checkpoint", "same_text"),
    [
        (_checkpoint_of({"text": 'é \n \t \x1f \u2028 / \\ " end', "n": 3, "no": None}), True),
        (_checkpoint_of({"half": 0.5, "neg": -0.0, "big": 2**62, "ok": True}), True),
        (_checkpoint_of({"tiny": 1e-7, "huge": 1e300}), False),
        (_checkpoint_of({"x": 1}, updated_channels=None, versions_seen={}), True),
        (_checkpoint_of({}, channel_versions={"a": 3, "b": "0004.0.1"}), True),
    ],
    ids=["text", "numbers", "exponents", "no-updates", "int-versions"],
)
def test_a_checkpoints_json_is_the_same_json_either_way(
    checkpoint: dict[str, Any], same_text: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """orjson writes a checkpoint (json_text is not called) as json would: the same text,
    except for numbers in exponent notation (1e-7 for 1e-07), which are the same numbers."""
    _same_json_by_orjson(_ids.checkpoint_json_text, checkpoint, same_text, monkeypatch)


class _Plain(enum.Enum):
    A = "a"


class _SeenDict(dict[str, Any]):
    """A dict subclass among the versions a node has seen."""


@pytest.mark.parametrize(
    "checkpoint",
    [
        _checkpoint_of({"text": _Text("plain"), "level": _Level.HIGH}),
        _checkpoint_of({"n": 2**70}),
        _checkpoint_of({"x": 1}, versions_seen={"node": {1: "v"}}),
        _checkpoint_of({"x": 1}, channel_versions={"x": math.nan}),
        _checkpoint_of({"x": 1}, channel_versions={"x": 1.5}),
        _checkpoint_of({"x": 1}, channel_versions={"x": _Plain.A}),
        _checkpoint_of({"x": 1}, channel_versions={"x": "a\x00b"}),
        _checkpoint_of({"x": 1}, channel_versions={"x": "a\ud800"}),
        _checkpoint_of({"x": 1}, versions_seen={"node": ["not", "a", "dict"]}),
        _checkpoint_of({"x": 1}, versions_seen={"a": {"x": "v"}, "b": {"x": math.nan}}),
        _checkpoint_of({"x": 1}, versions_seen={"a": {"x": "v"}, "b": {"x": _Plain.A}}),
        _checkpoint_of({"x": 1}, versions_seen={"a": {"x": "v"}, "b": _SeenDict(x=math.inf)}),
    ],
    ids=[
        "subclasses",
        "big-int",
        "int-key",
        "nan-version",
        "float-version",
        "enum-version",
        "nul",
        "lone-surrogate",
        "odd-versions-seen",
        "nan-seen-by-a-later-node",
        "enum-seen-by-a-later-node",
        "dict-subclass-seen",
    ],
)
def test_what_orjson_would_write_otherwise_takes_json_texts_path(
    checkpoint: dict[str, Any],
) -> None:
    """Same text, or the same error, as json_text: orjson writes NaN as null and an enum
    or a UUID where json refuses them; it refuses subclasses, big integers, keys that are
    not text and lone surrogates, and escapes NUL."""
    _same_as_json_text(_ids.checkpoint_json_text, checkpoint)


class _TextBlobSerializer:
    """A serializer that breaks its protocol: the value as text, not bytes."""

    def dumps_typed(self, obj: Any) -> tuple[str, Any]:
        return "json", str(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return data[1]


def test_a_serializer_returning_text_for_bytes_is_refused_by_name() -> None:
    """A few blobs go to the checkpoint statement as scalar parameters the server casts
    (`::bytea` would read text as an escaped string): a blob that is not bytes is refused
    before anything is sent."""
    serde: Any = _TextBlobSerializer()
    with pytest.raises(UnserializableValueError, match=r"must return \(str, bytes\)"):
        _core.blob_params(serde, {"doc": {"a": 1}}, {"doc": "1"})
    with pytest.raises(UnserializableValueError, match="_TextBlobSerializer returned"):
        _core.write_params(
            serde,
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}},
            [("doc", {"a": 1})],
            "task",
            "",
        )


_METADATA = {
    "source": "loop",
    "step": 3,
    "parents": {"": "1f0c-parent", "sub:1": "1f0c-other"},
    "run_id": "1f0c-run",
    "user": 'é \n \t \x1f \u2028 / \\ " end',
    "retries": 0,
    "ok": True,
    "none": None,
    "share": 0.25,
}


@pytest.mark.parametrize(
    ("metadata", "same_text"),
    [
        (_METADATA, True),
        ({}, True),
        ({"source": "input", "step": -1, "parents": {}}, True),
        ({"tiny": 1e-7, "huge": 1e300}, False),
    ],
    ids=["langgraph", "empty", "input", "exponents"],
)
def test_a_checkpoints_metadata_is_the_same_json_either_way(
    metadata: dict[str, Any], same_text: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """orjson writes plain metadata (json_text is not called) as json would: the same text,
    except for numbers in exponent notation, which are the same numbers."""
    _same_json_by_orjson(_ids.metadata_json_text, metadata, same_text, monkeypatch)


class _Str(str):
    """A str subclass in the metadata."""


@pytest.mark.parametrize(
    "metadata",
    [
        {"score": math.nan},
        {"score": -math.inf},
        {"n": 2**70},
        {1: "int key"},
        {"parents": {1: "int key"}},
        {"parents": {"": math.nan}},
        {"parents": {"": None}},
        {"parents": {"": _Str("sub")}},
        {"text": _Str("sub")},
        {"level": _Plain.A},
        {"when": datetime.datetime(2026, 1, 1)},
        {"nested": {"deep": {"x": 1}}},
        {"list": [1, 2]},
        {"nul": "a\x00b"},
        {"escaped": "a\\u0000b"},
        {"lone": "a\ud800"},
        {"parents": {"": "a\ud800"}},
    ],
    ids=[
        "nan",
        "inf",
        "big-int",
        "int-key",
        "int-key-in-parents",
        "nan-in-parents",
        "none-in-parents",
        "subclass-in-parents",
        "subclass",
        "enum",
        "datetime",
        "nested",
        "list",
        "nul",
        "escaped-backslash",
        "lone-surrogate",
        "lone-surrogate-in-parents",
    ],
)
def test_metadata_orjson_would_write_otherwise_takes_json_texts_path(
    metadata: dict[Any, Any],
) -> None:
    """Same text, or the same error, as json_text."""
    _same_as_json_text(_ids.metadata_json_text, metadata)
