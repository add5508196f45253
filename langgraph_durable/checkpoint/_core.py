"""The pure part of the saver: turning checkpoints into rows and rows into checkpoints.

Nothing here touches a database, so both the async saver and its generated sync twin share
it, and unit tests cover it without Postgres. Every rejection happens here, before a
connection is taken, so bad input never reaches a transaction (invariant I8).
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import TASKS
from typing_extensions import LiteralString

from langgraph_durable import _langgraph
from langgraph_durable._db import BytesArray, IntArray, TextArray
from langgraph_durable._fencing import fence_of
from langgraph_durable._identity import NAMESPACE_ORIGINS
from langgraph_durable._ids import (
    ID_LIMITS,
    checkpoint_json_text,
    fits_key,
    json_text,
    lone_surrogate,
    metadata_json_text,
    stored_id,
    thread_id_of,
)
from langgraph_durable._secret_names import sounds_secret
from langgraph_durable._sql import store_writes
from langgraph_durable.checkpoint._events import EMPTY_EVENT_PARAMS
from langgraph_durable.errors import (
    FencedOutError,
    InvalidInputError,
    InvalidThreadIdError,
    UnserializableValueError,
)

__all__ = [
    "ID_LIMITS",
    "MAX_LIST_LIMIT",
    "NO_BLOBS",
    "NO_PARKED_WRITES",
    "PRUNE_STRATEGIES",
    "TUPLE_COLUMNS",
    "CheckpointRow",
    "LargeBlobs",
    "assemble_delta_history",
    "blob_params",
    "check_fenced",
    "checkpoint_row",
    "config_of",
    "delta_channel_names",
    "fence_params",
    "large_blobs",
    "list_limit",
    "load_tuple",
    "metadata_filter",
    "migrate_pending_sends",
    "needs_sends_migration",
    "next_version",
    "parked_write_params",
    "regular_writes_statement",
    "rejected_key",
    "replaces_earlier",
    "stored_id",
    "target",
    "thread_id_of",
    "tuple_row_of",
    "write_key",
    "write_params",
]

PRUNE_STRATEGIES = ("keep_latest", "delete")

CheckpointRow = dict[str, Any]

TUPLE_COLUMNS = (
    "thread_id",
    "checkpoint",
    "checkpoint_ns",
    "checkpoint_id",
    "parent_checkpoint_id",
    "metadata",
    "channel_values",
    "pending_writes",
)
"""The columns of `select_tuple_columns`, in order. Reads fetch tuples and name them here:
a dict row factory builds the result's column descriptions on every execute, which a
read of one small checkpoint pays for in CPU."""


def tuple_row_of(values: Sequence[Any]) -> CheckpointRow:
    """A fetched `select_tuple_columns` tuple as a row keyed by its column names."""
    return dict(zip(TUPLE_COLUMNS, values, strict=True))


MAX_LIST_LIMIT = 2**63 - 1
"""Postgres' LIMIT is a bigint."""


def list_limit(limit: object) -> int | None:
    """`list(limit=...)`: None, or a whole number from 0 to 2**63 - 1."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInputError(
            f"list(limit={limit!r}): pass None or a whole number from 0 to 2**63 - 1."
        )
    return limit


def target(config: RunnableConfig) -> tuple[str, str, str | None]:
    """Read (thread_id, checkpoint_ns, checkpoint_id) from a config, validated."""
    configurable = config.get("configurable") or {}
    if "thread_id" not in configurable:
        raise InvalidThreadIdError(
            'The config has no thread_id: pass {"configurable": {"thread_id": ...}}.'
        )
    thread_id = thread_id_of(configurable["thread_id"])
    checkpoint_ns = thread_id_of(configurable.get("checkpoint_ns") or "", "checkpoint_ns")
    checkpoint_id = configurable.get("checkpoint_id") or None
    if checkpoint_id is not None:
        checkpoint_id = thread_id_of(checkpoint_id, "checkpoint_id")
    return thread_id, checkpoint_ns, checkpoint_id


def next_version(current: str | int | None) -> str:
    """The next channel version, in the format of langgraph-checkpoint-postgres.

    Same format, so versions written by either saver order correctly for the other: a
    zero-padded counter, then a random fraction that keeps concurrent forks apart.
    """
    if current is None:
        current_v = 0
    elif isinstance(current, int):
        current_v = current
    else:
        current_v = int(current.split(".")[0])
    return f"{current_v + 1:032}.{random.random():016}"


_SCALARS = frozenset({int, float, bool, type(None)})
"""Types whose values hold no text: nothing to check for lone surrogates."""


def _is_inline(value: object) -> bool:
    """Whether a channel value can live in the checkpoint's JSON instead of a blob row.

    Strings with NUL and non-finite floats cannot be stored in JSONB, so they go to blobs;
    that is how they round-trip where upstream fails. Values reach here after
    `_nolone_surrogate`, so a string holds no lone surrogate.
    """
    if type(value) is str:  # the common case first, without isinstance
        return "\x00" not in value
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return "\x00" not in value
    return False


def _nolone_surrogate(value: object, where: Callable[[], str]) -> None:
    """A string with a lone surrogate, which LangGraph's serializer would store as '?'.

    Checked on channel values and writes, and one level into a mapping (a graph input or a
    state update): a few `isascii()` calls, no walk through deep structures. `where` names
    the value in the error; it is only called on failure, as every step checks each value.
    """
    if type(value) is str:
        if value.isascii():
            return
    elif type(value) in _SCALARS:
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, str) and lone_surrogate(item) is not None:
                _nolone_surrogate(item, functools.partial("{} (key {!r})".format, where(), key))
        return
    if isinstance(value, str) and lone_surrogate(value) is not None:
        raise UnserializableValueError(
            f"{where()} is a string with a lone surrogate, which is not valid text (the "
            "serializer would silently store '?' in its place); nothing was written. "
            "Decode the text properly (e.g. errors='replace') before it enters the state."
        )


REDACTED = "[redacted]"


@dataclass(frozen=True)
class MetadataRedaction:
    """Which checkpoint metadata values are stored as "[redacted]".

    LangGraph copies every plain `configurable` value into each checkpoint's metadata, which
    is stored as clear text (it must stay queryable by `list(filter=...)`), so an API key
    passed in `configurable` would sit in every checkpoint. By default a key whose name
    contains a secret-sounding word or names a token (`token`,
    `access_token`, `session_token`) is redacted; counts and limits of tokens (`max_tokens`,
    `token_count`, `input_tokens`) are kept, so that `list(filter=...)` finds them as
    upstream's saver does.

    Args:
        allow: Keys stored as they are even if their name sounds secret.
        redact: Your own rule, `(key, value) -> bool`, used instead of the name patterns
            (keys in `allow` are still kept).
    """

    allow: frozenset[str] = frozenset()
    redact: Callable[[str, Any], bool] | None = None

    def redacts(self, key: str, value: Any) -> bool:
        if key in self.allow:
            return False
        if self.redact is not None:
            return bool(self.redact(key, value))
        if type(key) is str:  # a subclass may change lower(): not cached
            return sounds_secret(key)
        return sounds_secret.__wrapped__(key)

    def apply(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        return {
            key: REDACTED if self.redacts(key, value) else value for key, value in metadata.items()
        }


DEFAULT_REDACTION = MetadataRedaction()


def checkpoint_row(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    *,
    inline_values: bool = True,
    redaction: MetadataRedaction = DEFAULT_REDACTION,
) -> tuple[CheckpointRow, dict[str, Any]]:
    """Split a checkpoint into its row and the channel values that go to blob rows.

    With `inline_values` off (the serializer encrypts), every channel value goes to a blob,
    so that none stays readable in the checkpoint's JSON; upstream reads such rows as well,
    since it loads a blob for every channel version the checkpoint lists.
    """
    thread_id, checkpoint_ns, parent_id = target(config)
    fits_key(thread_id, "thread_id")  # valid text: `target` checked it
    fits_key(checkpoint_ns, "checkpoint_ns")
    stored = checkpoint.copy()
    inline = dict(checkpoint["channel_values"])
    blob_values: dict[str, Any] = {}
    for channel, value in checkpoint["channel_values"].items():
        if inline_values and type(value) is str and value.isascii() and "\x00" not in value:
            continue  # most values: ASCII text stays in the checkpoint's JSON, checked here
        _nolone_surrogate(value, functools.partial("Channel {!r}".format, channel))
        if _langgraph.is_delta_snapshot(value):
            # The marker tells readers that a snapshot blob stands behind this channel.
            blob_values[channel] = value
            inline[channel] = True
        elif not inline_values or not _is_inline(value):
            blob_values[channel] = inline.pop(channel)
    stored["channel_values"] = inline
    serializable_metadata = redaction.apply(get_serializable_checkpoint_metadata(config, metadata))
    run_id = serializable_metadata.get("run_id")
    if run_id is not None:
        stored_id(run_id, "run_id")
    step = serializable_metadata.get("step")
    row: CheckpointRow = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": stored_id(checkpoint["id"], "checkpoint_id"),
        "parent_checkpoint_id": None if parent_id is None else fits_key(parent_id, "checkpoint_id"),
        "checkpoint": checkpoint_json_text(stored, f"checkpoint {checkpoint['id']}"),
        "metadata": metadata_json_text(serializable_metadata, "checkpoint metadata"),
        **fence_params(config),
        "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
    }
    return row, blob_values


def note_subgraph_entry(config: RunnableConfig | None) -> None:
    """Record where the parent task of a subgraph ran, when `config` is the subgraph
    loop's read on entry (`_identity.NamespaceOrigins`: its effects' keys and events' ids
    tell the subgraph's executions apart by it)."""
    entry = None if config is None else _langgraph.subgraph_entry(config)
    if entry is not None:
        NAMESPACE_ORIGINS.enter(
            entry.thread_id,
            entry.parent_namespace,
            entry.level,
            entry.origin,
            entry.scratchpad,
            entry.counter,
        )


def step_span_attributes(params: Mapping[str, Any]) -> dict[str, Any]:
    """What a committed step's span carries: the checkpoint, its step, the run (if any)
    and how many parked writes the statement carried."""
    return {
        "langgraph_durable.thread_id": params["thread_id"],
        "langgraph_durable.checkpoint_ns": params["checkpoint_ns"],
        "langgraph_durable.checkpoint_id": params["checkpoint_id"],
        "langgraph_durable.step": params.get("step"),
        "langgraph_durable.run_id": params.get("run_id"),
        "langgraph_durable.writes_carried": len(params.get("w_task_ids") or ()),
    }


def check_fenced(written: bool, params: Mapping[str, Any]) -> None:
    """Raise `FencedOutError` when the statement's fence refused a write."""
    if written:
        return
    raise FencedOutError(
        f"Thread {params['thread_id']!r}: this process no longer holds the thread (its "
        f"fencing token {params.get('fence_token')} is not the thread's any more: another "
        "worker took the run over after the lease ran out, or the run was cancelled, timed "
        "out or superseded by a newer run), so nothing was written. Stop working on this "
        "thread; the run's status in the registry says what happened to it."
    )


def fence_params(config: RunnableConfig) -> dict[str, Any]:
    """The fencing token (and run) a write carries, or NULLs when it holds no lease."""
    fence = fence_of(config)
    if fence is None:
        return {"fence_token": None, "run_id": None}
    return {"fence_token": fence.token, "run_id": fence.run_id}


def config_of(row: CheckpointRow) -> RunnableConfig:
    """The config `put` returns for a stored checkpoint row."""
    return {
        "configurable": {
            "thread_id": row["thread_id"],
            "checkpoint_ns": row["checkpoint_ns"],
            "checkpoint_id": row["checkpoint_id"],
        }
    }


def _failing_key(serde: SerializerProtocol, value: Any) -> str:
    """For a dict (a graph input on `__start__`, a state update), the first bad key."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            try:
                serde.dumps_typed(item)
            except Exception:
                return f" (key {key!r})"
    return ""


def _dump(serde: SerializerProtocol, value: Any, where: Callable[[], str]) -> tuple[str, bytes]:
    """`serde.dumps_typed(value)`; a failure names the value (`where`, called only then).

    A serializer must return its type name as text and the value as bytes (or a
    `bytearray` or `memoryview`: LangGraph's JsonPlusSerializer hands a bytearray value
    over as it is): a few values go to the checkpoint statement as scalar parameters cast
    by the server (`::bytea`, `::text`), which would take text for bytes instead of
    refusing it.
    """
    try:
        type_, blob = serde.dumps_typed(value)
    except Exception as exc:
        raise UnserializableValueError(
            f"{where()}{_failing_key(serde, value)} holds a {type(value).__name__} the "
            f"serializer cannot handle ({exc}); nothing was written. Make the value "
            "serializable or keep it out of the state."
        ) from exc
    if not isinstance(blob, (bytes, bytearray, memoryview)) or not isinstance(type_, str):
        raise UnserializableValueError(
            f"{where()}: the serializer {type(serde).__name__} returned "
            f"({type(type_).__name__}, {type(blob).__name__}) for a {type(value).__name__}; "
            "nothing was written. Its dumps_typed must return (str, bytes)."
        )
    return type_, blob


def rejected_key(config: RunnableConfig) -> tuple[str, str] | None:
    """(thread, namespace) of a checkpoint whose put was rejected, if its ids are valid."""
    try:
        thread_id, checkpoint_ns, _ = target(config)
    except InvalidInputError:
        return None
    return thread_id, checkpoint_ns


NO_BLOBS: Mapping[str, Sequence[Any]] = MappingProxyType(
    {"channels": (), "versions": (), "types": (), "blobs": ()}
)
"""`blob_params` of a checkpoint with no new blob (every value inline, or none changed):
shared, read-only. A put's parameters live until its statement has committed, and under
many runs on one loop every container alive across that wait brings the collector's next
pass nearer (design.md)."""

NO_PARKED_WRITES: Mapping[str, Sequence[Any]] = MappingProxyType(
    {
        "w_checkpoint_ids": (),
        "w_task_ids": (),
        "w_task_paths": (),
        "w_idxs": (),
        "w_channels": (),
        "w_types": (),
        "w_blobs": (),
        **EMPTY_EVENT_PARAMS,
    }
)
"""`parked_write_params` of a put that carries none: shared, read-only (see `NO_BLOBS`)."""


def blob_params(
    serde: SerializerProtocol,
    blob_values: Mapping[str, Any],
    new_versions: ChannelVersions,
) -> Mapping[str, Sequence[Any]]:
    """Serialize the new versions of blob-stored channels, naming the channel on failure.

    Returns the column arrays the `put_checkpoint` statement unnests (`NO_BLOBS` when
    there is none).
    """
    params: dict[str, list[Any]] | None = None
    for channel, version in new_versions.items():
        if channel not in blob_values:
            continue
        if params is None:
            params = {
                "channels": TextArray(),
                "versions": TextArray(),
                "types": TextArray(),
                "blobs": BytesArray(),
            }
        where = functools.partial("Channel {!r}".format, channel)
        type_, blob = _dump(serde, blob_values[channel], where)
        params["channels"].append(stored_id(channel, "channel"))
        params["versions"].append(str(version))
        params["types"].append(type_)
        params["blobs"].append(blob)
    return NO_BLOBS if params is None else params


def write_key(config: RunnableConfig) -> tuple[str, str, str]:
    """(thread_id, checkpoint_ns, checkpoint_id) a `put_writes` call stores against."""
    thread_id, checkpoint_ns, checkpoint_id = target(config)
    if checkpoint_id is None:
        raise InvalidInputError(
            "put_writes needs a config with a checkpoint_id: pass the config that `put` returned."
        )
    return thread_id, checkpoint_ns, checkpoint_id


def replaces_earlier(writes: Sequence[tuple[str, Any]]) -> bool:
    """Special writes (errors, interrupts, resumes) replace a task's earlier ones; regular
    writes keep what was stored first."""
    return all(channel in WRITES_IDX_MAP for channel, _ in writes)


def writes_statement(
    config: RunnableConfig, writes: Sequence[tuple[str, Any]], *, events: bool
) -> LiteralString:
    """The statement that stores these writes of a task (see `_sql.store_writes`)."""
    return store_writes(
        fenced=fence_of(config) is not None, replace=replaces_earlier(writes), events=events
    )


def regular_writes_statement(params: Mapping[str, Any]) -> LiteralString:
    """The statement that stores regular writes (no special channel) by their
    `write_params`, as `writes_statement` gives it for them."""
    return store_writes(
        fenced=params["fence_token"] is not None, replace=False, events=bool(params["e_ids"])
    )


def write_params(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    key: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    """Serialize a task's writes into the parameters of the writes statements.

    Special writes take fixed negative indexes (`WRITES_IDX_MAP`), regular ones their
    position. `key`: `write_key(config)`, when the caller has it already.
    """
    thread_id, checkpoint_ns, checkpoint_id = write_key(config) if key is None else key
    fence = fence_of(config)
    params: dict[str, Any] = {
        "thread_id": fits_key(thread_id, "thread_id"),  # valid text: `target` checked it
        "checkpoint_ns": fits_key(checkpoint_ns, "checkpoint_ns"),
        "checkpoint_id": fits_key(checkpoint_id, "checkpoint_id"),
        "task_id": stored_id(task_id, "task_id"),
        "task_path": thread_id_of(task_path, "task_path"),
        "fence_token": None if fence is None else fence.token,
        "idxs": IntArray(),
        "channels": TextArray(),
        "types": TextArray(),
        "blobs": BytesArray(),
    }
    if replaces_earlier(writes):
        # Two writes to one special channel share its index: the later one replaces the
        # earlier, as upstream's one upsert per write does (one multi-row upsert touching a
        # row twice is a server error). Found by tests/integration/test_saver_properties.py.
        last = {WRITES_IDX_MAP[channel]: i for i, (channel, _) in enumerate(writes)}
        writes = [w for i, w in enumerate(writes) if last[WRITES_IDX_MAP[w[0]]] == i]
    for idx, (channel, value) in enumerate(writes):
        where = functools.partial("Write to channel {!r} by task {}".format, channel, task_id)
        _nolone_surrogate(value, where)
        type_, blob = _dump(serde, value, where)
        # A plain int, whatever WRITES_IDX_MAP holds (`IntArray` is sent as int8[] and
        # cast by the statement, so a value outside 32 bits fails instead of wrapping).
        params["idxs"].append(int(WRITES_IDX_MAP.get(channel, idx)))
        params["channels"].append(stored_id(channel, "channel"))
        params["types"].append(type_)
        params["blobs"].append(blob)
    return params


def delta_channel_names(metadata: CheckpointMetadata, blob_values: Mapping[str, Any]) -> set[str]:
    """The `DeltaChannel`s a checkpoint reveals: its snapshot markers and delta counters."""
    names = {ch for ch, value in blob_values.items() if _langgraph.is_delta_snapshot(value)}
    counters = metadata.get("counters_since_delta_snapshot")
    if isinstance(counters, Mapping):
        names.update(str(channel) for channel in counters)
    return names


def parked_write_params(parked: Collection[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The `w_*` arrays of `put_checkpoint`: the rows of parked `write_params` results.

    Parked writes are regular writes only, so they are inserted as first stored. The
    outbox events of their tasks (`e_*`) travel with them. Without events the `e_*`
    arrays are the shared empty ones, and without parked writes all of them are
    (`NO_PARKED_WRITES`; see `NO_BLOBS`).
    """
    if not parked:
        return NO_PARKED_WRITES
    params: dict[str, Any] = {
        "w_checkpoint_ids": TextArray(),
        "w_task_ids": TextArray(),
        "w_task_paths": TextArray(),
        "w_idxs": IntArray(),
        "w_channels": TextArray(),
        "w_types": TextArray(),
        "w_blobs": BytesArray(),
    }
    events: dict[str, list[Any]] | None = None
    for writes in parked:
        if writes.get("e_ids"):
            if events is None:
                events = {name: [] for name in EMPTY_EVENT_PARAMS}
            for name in EMPTY_EVENT_PARAMS:
                events[name] += writes.get(name, ())
        count = len(writes["idxs"])
        params["w_checkpoint_ids"] += [writes["checkpoint_id"]] * count
        params["w_task_ids"] += [writes["task_id"]] * count
        params["w_task_paths"] += [writes["task_path"]] * count
        params["w_idxs"] += writes["idxs"]
        params["w_channels"] += writes["channels"]
        params["w_types"] += writes["types"]
        params["w_blobs"] += writes["blobs"]
    params.update(EMPTY_EVENT_PARAMS if events is None else events)
    return params


@dataclass(frozen=True)
class LargeBlobs:
    """The blobs a read left out for their size (`select_tuple_columns`): the slots of the
    rows' `channel_values` to fill, and the parameters of `select_large_blobs`, which
    fetches them by key, numbered in the same order."""

    slots: list[list[Any]]
    params: dict[str, TextArray]

    def fill(self, found: Iterable[Sequence[Any]]) -> bool:
        """Put each fetched `(ordinality, blob)` in its slot; whether every slot got its
        blob. A missing one was deleted after the read, with the checkpoint that named it
        (`delete_thread`, `delete_for_runs`, `prune`): the caller reads again."""
        filled = 0
        for i, blob in found:
            self.slots[i - 1][2] = blob
            filled += 1
        return filled == len(self.slots)


def large_blobs(rows: Iterable[CheckpointRow]) -> LargeBlobs | None:
    """The blobs these rows lack for their size, or None: the common case, nothing to do.

    Such a slot holds no blob and, as a fourth element, the version the checkpoint names
    (as `select_tuple_columns` read it): the blob's key with the row's thread and
    namespace, never written twice, so the fetch finds this very value or nothing.
    """
    slots: list[list[Any]] = []
    params: dict[str, TextArray] = {}
    for row in rows:
        for slot in row["channel_values"] or ():
            if len(slot) < 4 or slot[3] is None:
                continue
            if not params:
                params = {
                    name: TextArray()
                    for name in ("thread_ids", "checkpoint_nss", "channels", "versions")
                }
            slots.append(slot)
            params["thread_ids"].append(row["thread_id"])
            params["checkpoint_nss"].append(row["checkpoint_ns"])
            params["channels"].append(slot[0].decode())
            params["versions"].append(slot[3].decode())
    return LargeBlobs(slots, params) if slots else None


def _load_blobs(
    serde: SerializerProtocol, blobs: Iterable[Sequence[bytes]] | None
) -> dict[str, Any]:
    # (channel, type, blob), and from `select_tuple_columns` the large blob's version.
    return {
        slot[0].decode(): serde.loads_typed((slot[1].decode(), slot[2]))
        for slot in (blobs or ())
        if slot[1].decode() != "empty"
    }


def _load_writes(
    serde: SerializerProtocol, writes: Iterable[Sequence[bytes]] | None
) -> list[PendingWrite]:
    ordered = sorted(
        writes or (),
        key=lambda w: writes_sort_key(w[4].decode(), w[0].decode(), int(w[5])),
    )
    return [
        (task_id.decode(), channel.decode(), serde.loads_typed((type_.decode(), blob)))
        for task_id, channel, type_, blob, _path, _idx in ordered
    ]


def migrate_pending_sends(
    serde: SerializerProtocol,
    row: CheckpointRow,
    sends: Sequence[Sequence[bytes]],
    first_version: str,
) -> None:
    """Fold the pending sends of a pre-v4 parent into the row, as upstream does on read."""
    if not sends:
        return
    values = [serde.loads_typed((type_.decode(), blob)) for type_, blob in sends]
    type_, blob = serde.dumps_typed(values)
    channel_values = row["channel_values"] or []
    channel_values.append([TASKS.encode(), type_.encode(), blob])
    row["channel_values"] = channel_values
    versions = row["checkpoint"]["channel_versions"]
    versions[TASKS] = max(versions.values()) if versions else first_version


def needs_sends_migration(row: CheckpointRow) -> bool:
    return bool(row["checkpoint"].get("v", 4) < 4 and row["parent_checkpoint_id"])


def load_tuple(serde: SerializerProtocol, row: CheckpointRow) -> CheckpointTuple:
    """Turn a `select_tuple_columns` row into a CheckpointTuple."""
    checkpoint = cast(Checkpoint, dict(row["checkpoint"]))
    checkpoint["channel_values"] = {
        **(row["checkpoint"].get("channel_values") or {}),
        **_load_blobs(serde, row["channel_values"]),
    }

    def config_for(checkpoint_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": row["thread_id"],
                "checkpoint_ns": row["checkpoint_ns"],
                "checkpoint_id": checkpoint_id,
            }
        }

    return CheckpointTuple(
        config=config_for(row["checkpoint_id"]),
        checkpoint=checkpoint,
        metadata=cast(CheckpointMetadata, row["metadata"]),
        parent_config=(
            config_for(row["parent_checkpoint_id"]) if row["parent_checkpoint_id"] else None
        ),
        pending_writes=_load_writes(serde, row["pending_writes"]),
    )


def assemble_delta_history(
    serde: SerializerProtocol,
    channels: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
) -> dict[str, DeltaChannelHistory]:
    """Build per-channel histories from the rows of the `delta_history` query.

    Writes come oldest checkpoint first (largest depth first) and, within a checkpoint, in
    `writes_sort_key` order, which is the order live execution applied them in.
    """
    writes: dict[str, list[tuple[int, tuple[str, str, int], PendingWrite]]] = {
        ch: [] for ch in channels
    }
    seeds: dict[str, Any] = {}
    for r in rows:
        kind = r["kind"]
        if kind == "w":
            channel = r["channel"]
            value = serde.loads_typed((r["type"], r["blob"]))
            key = writes_sort_key(r["task_path"], r["task_id"], r["idx"])
            writes[channel].append((r["depth"], key, (r["task_id"], channel, value)))
        elif kind == "s":
            if r["blob"] is not None:
                seeds[r["channel"]] = serde.loads_typed((r["type"], r["blob"]))
            elif r["inline"] is not None:
                seeds[r["channel"]] = r["inline"]
    history: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        ordered = sorted(writes[ch], key=lambda w: (-w[0], w[1]))
        entry: DeltaChannelHistory = {"writes": [w[2] for w in ordered]}
        if ch in seeds:
            entry["seed"] = seeds[ch]
        history[ch] = entry
    return history


def metadata_filter(filter: Mapping[str, Any]) -> str:
    """The JSON a `list(filter=...)` matches metadata against, rejected early if unusable."""
    return json_text(dict(filter), "list filter")
