"""The pure part of the saver: turning checkpoints into rows and rows into checkpoints.

Nothing here touches a database, so both the async saver and its generated sync twin share
it, and unit tests cover it without Postgres. Every rejection happens here, before a
connection is taken, so bad input never reaches a transaction (invariant I8).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence, Set
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
from langgraph.checkpoint.serde.types import TASKS, _DeltaSnapshot

from langgraph_durable.errors import (
    InvalidInputError,
    InvalidThreadIdError,
    UnserializableValueError,
)

__all__ = [
    "PRUNE_STRATEGIES",
    "CheckpointRow",
    "assemble_delta_history",
    "blob_params",
    "checkpoint_row",
    "load_tuple",
    "next_version",
    "target",
    "thread_id_of",
    "write_params",
]

PRUNE_STRATEGIES = ("keep_latest", "delete")

CheckpointRow = dict[str, Any]


def thread_id_of(value: object, what: str = "thread_id") -> str:
    """Validate a thread id (or namespace) the way Postgres will store it.

    Thread ids are stored as TEXT, which cannot hold NUL characters; upstream lets such an id
    reach the server and fail mid-transaction. Integers and UUIDs are accepted as their text.
    """
    if isinstance(value, (bytes, bytearray)) or value is None:
        raise InvalidThreadIdError(f"{what} must be a string, got {type(value).__name__}.")
    text = str(value)
    if "\x00" in text:
        raise InvalidThreadIdError(f"{what} {text!r} contains a NUL character; remove it.")
    if what == "thread_id" and not text:
        raise InvalidThreadIdError("thread_id is empty; pass configurable.thread_id.")
    return text


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


def durability_of(config: RunnableConfig) -> str:
    """The durability mode LangGraph runs this call under ("async" when unset)."""
    return str((config.get("configurable") or {}).get("__pregel_durability") or "async")


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


def _is_inline(value: object) -> bool:
    """Whether a channel value can live in the checkpoint's JSON instead of a blob row.

    Strings with NUL and non-finite floats cannot be stored in JSONB, so they go to blobs;
    that is how they round-trip where upstream fails.
    """
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return "\x00" not in value
    return False


def _json(value: object, where: str) -> str:
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UnserializableValueError(
            f"{where} cannot be stored as JSON ({exc}); nothing was written. "
            "Use plain str/int/float/bool/list/dict values there."
        ) from exc
    if "\\u0000" in text:
        raise InvalidInputError(
            f"{where} contains a NUL character, which Postgres JSONB cannot store; "
            "nothing was written. Remove the NUL character."
        )
    return text


def checkpoint_row(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
) -> tuple[CheckpointRow, dict[str, Any]]:
    """Split a checkpoint into its row and the channel values that go to blob rows."""
    thread_id, checkpoint_ns, parent_id = target(config)
    stored = checkpoint.copy()
    inline = dict(checkpoint["channel_values"])
    blob_values: dict[str, Any] = {}
    for channel, value in checkpoint["channel_values"].items():
        if isinstance(value, _DeltaSnapshot):
            # The marker tells readers that a snapshot blob stands behind this channel.
            blob_values[channel] = value
            inline[channel] = True
        elif not _is_inline(value):
            blob_values[channel] = inline.pop(channel)
    stored["channel_values"] = inline
    row: CheckpointRow = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": thread_id_of(checkpoint["id"], "checkpoint id"),
        "parent_checkpoint_id": parent_id,
        "checkpoint": _json(stored, f"checkpoint {checkpoint['id']}"),
        "metadata": _json(
            get_serializable_checkpoint_metadata(config, metadata), "checkpoint metadata"
        ),
    }
    return row, blob_values


def _failing_key(serde: SerializerProtocol, value: Any) -> str:
    """For a dict (a graph input on `__start__`, a state update), the first bad key."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            try:
                serde.dumps_typed(item)
            except Exception:
                return f" (key {key!r})"
    return ""


def _dump(serde: SerializerProtocol, value: Any, where: str) -> tuple[str, bytes]:
    try:
        return serde.dumps_typed(value)
    except Exception as exc:
        raise UnserializableValueError(
            f"{where}{_failing_key(serde, value)} holds a {type(value).__name__} the "
            f"serializer cannot handle ({exc}); nothing was written. Make the value "
            "serializable or keep it out of the state."
        ) from exc


def rejected_key(config: RunnableConfig) -> tuple[str, str] | None:
    """(thread, namespace) of a checkpoint whose put was rejected, if its ids are valid."""
    try:
        thread_id, checkpoint_ns, _ = target(config)
    except InvalidInputError:
        return None
    return thread_id, checkpoint_ns


def _no_nul(text: str, what: str) -> str:
    if "\x00" in text:
        raise InvalidInputError(f"{what} {text!r} contains a NUL character; nothing was written.")
    return text


def blob_params(
    serde: SerializerProtocol,
    blob_values: Mapping[str, Any],
    new_versions: ChannelVersions,
) -> dict[str, list[Any]]:
    """Serialize the new versions of blob-stored channels, naming the channel on failure.

    Returns the column arrays the `put_checkpoint` statement unnests.
    """
    params: dict[str, list[Any]] = {"channels": [], "versions": [], "types": [], "blobs": []}
    for channel, version in new_versions.items():
        if channel not in blob_values:
            continue
        type_, blob = _dump(serde, blob_values[channel], f"Channel {channel!r}")
        params["channels"].append(channel)
        params["versions"].append(str(version))
        params["types"].append(type_)
        params["blobs"].append(blob)
    return params


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


def write_params(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> dict[str, Any]:
    """Serialize a task's writes into the parameters of the writes statements.

    Special writes take fixed negative indexes (`WRITES_IDX_MAP`), regular ones their
    position.
    """
    thread_id, checkpoint_ns, checkpoint_id = write_key(config)
    params: dict[str, Any] = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "task_id": thread_id_of(task_id, "task_id"),
        "task_path": _no_nul(task_path, "task_path"),
        "idxs": [],
        "channels": [],
        "types": [],
        "blobs": [],
    }
    for idx, (channel, value) in enumerate(writes):
        type_, blob = _dump(serde, value, f"Write to channel {channel!r} by task {task_id}")
        params["idxs"].append(WRITES_IDX_MAP.get(channel, idx))
        params["channels"].append(_no_nul(channel, "write channel"))
        params["types"].append(type_)
        params["blobs"].append(blob)
    return params


ERROR_SOURCE_NODE = "__error_source_node__"
"""LangGraph's marker written next to an error for a node with an error handler."""

RUNTIME_KEY = "__pregel_runtime"
"""LangGraph's config key for the runtime of a running graph loop."""


def delta_channel_names(metadata: CheckpointMetadata, blob_values: Mapping[str, Any]) -> set[str]:
    """The `DeltaChannel`s a checkpoint reveals: its snapshot markers and delta counters."""
    names = {channel for channel, value in blob_values.items() if isinstance(value, _DeltaSnapshot)}
    counters = metadata.get("counters_since_delta_snapshot")
    if isinstance(counters, Mapping):
        names.update(str(channel) for channel in counters)
    return names


def may_park(
    config: RunnableConfig, writes: Sequence[tuple[str, Any]], delta_channels: Set[str]
) -> bool:
    """Whether writes may wait for the next checkpoint to carry them (see `_parking.py`).

    Only writes of a running graph loop (its config carries LangGraph's runtime), whose
    checkpoint follows on another thread or task: `update_state` stores its writes and
    only then the checkpoint, and would wait out the linger. And not the writes LangGraph
    itself waits for before it goes on: special writes (errors, interrupts, resumes), the
    error-source marker an error handler waits for, and writes to a `DeltaChannel`, which
    the next checkpoint's save waits for. Parking those would add the linger to a step.
    """
    if RUNTIME_KEY not in (config.get("configurable") or {}):
        return False
    return not any(
        channel in WRITES_IDX_MAP or channel == ERROR_SOURCE_NODE or channel in delta_channels
        for channel, _ in writes
    )


def parked_write_params(parked: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The `w_*` arrays of `put_checkpoint`: the rows of parked `write_params` results.

    Parked writes are regular writes only, so they are inserted as first stored.
    """
    params: dict[str, list[Any]] = {
        "w_checkpoint_ids": [],
        "w_task_ids": [],
        "w_task_paths": [],
        "w_idxs": [],
        "w_channels": [],
        "w_types": [],
        "w_blobs": [],
    }
    for writes in parked:
        count = len(writes["idxs"])
        params["w_checkpoint_ids"] += [writes["checkpoint_id"]] * count
        params["w_task_ids"] += [writes["task_id"]] * count
        params["w_task_paths"] += [writes["task_path"]] * count
        params["w_idxs"] += writes["idxs"]
        params["w_channels"] += writes["channels"]
        params["w_types"] += writes["types"]
        params["w_blobs"] += writes["blobs"]
    return params


def _load_blobs(
    serde: SerializerProtocol, blobs: Iterable[Sequence[bytes]] | None
) -> dict[str, Any]:
    return {
        channel.decode(): serde.loads_typed((type_.decode(), blob))
        for channel, type_, blob in (blobs or ())
        if type_.decode() != "empty"
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
    return _json(dict(filter), "list filter")
