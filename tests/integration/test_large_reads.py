"""A blob over 128 KiB is read as a column of its own, not inside the tuple's array.

`select_tuple_columns` leaves such a blob out (NULL in its slot, its version beside it)
and the saver fetches it by that key with `select_large_blobs` on the same cursor.
Between the two statements the checkpoint may be deleted (`delete_thread`, `prune`); the
saver then reads again in one statement (`*_whole`), so it returns the thread as it is
now, never a checkpoint without one of its values, and a checkpoint put again under the
same id cannot lend the read another state's blob.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg.rows import tuple_row

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable._sql import QUERIES
from langgraph_durable.checkpoint import _core

LARGE = {"doc": "".join(f"{n:08d}" for n in range(20_000))}  # 160 kB: over the line
SMALL = {"doc": "x" * 1000}  # a blob (a dict), inside the array


def _put(saver: Any, config: Any, values: dict[str, Any], step: int) -> Any:
    checkpoint = empty_checkpoint()
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = versions
    return saver.put(config, checkpoint, {"source": "loop", "step": step}, versions)


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"large-read-{uuid.uuid4().hex}", "checkpoint_ns": ""}}


def test_the_tuple_statement_leaves_only_large_blobs_out(
    saver: DurablePostgresSaver, db_dsn: str
) -> None:
    config = _thread()
    _put(saver, config, {"large": LARGE, "small": SMALL, "text": "inline"}, 0)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        cur.execute(
            QUERIES["select_tuple_latest"], {**config["configurable"], "checkpoint_id": None}
        )
        found = cur.fetchone()
    assert found is not None
    slots = {slot[0].decode(): slot for slot in _core.tuple_row_of(found)["channel_values"]}
    assert sorted(slots) == ["large", "small"]  # "text" is inline, in the checkpoint's JSON
    assert slots["large"][2] is None
    assert slots["large"][3] is not None  # the version: the blob's key
    assert slots["small"][2] is not None
    assert slots["small"][3] is None


def test_large_and_small_values_read_back_through_get_tuple_and_list(
    saver: DurablePostgresSaver,
) -> None:
    config = _thread()
    first = _put(saver, config, {"large": LARGE, "small": SMALL}, 0)
    other = {"doc": LARGE["doc"][::-1]}
    _put(saver, first, {"large": other, "second": LARGE}, 1)

    latest = saver.get_tuple(config)
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"large": other, "second": LARGE}
    earlier = saver.get_tuple(first)
    assert earlier is not None
    assert earlier.checkpoint["channel_values"] == {"large": LARGE, "small": SMALL}
    listed = [t.checkpoint["channel_values"] for t in saver.list(config)]
    assert listed == [{"large": other, "second": LARGE}, {"large": LARGE, "small": SMALL}]


async def test_the_async_saver_reads_large_values_too(
    db_dsn: str, saver: DurablePostgresSaver
) -> None:
    config = _thread()
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as asaver:
        first = await asaver.aput(
            config,
            {
                **empty_checkpoint(),
                "channel_values": {"large": LARGE},
                "channel_versions": {"large": "1"},
            },
            {"source": "loop", "step": 0},
            {"large": "1"},
        )
        found = await asaver.aget_tuple(first)
        assert found is not None
        assert found.checkpoint["channel_values"] == {"large": LARGE}
        assert [t.checkpoint["channel_values"] async for t in asaver.alist(config)] == [
            {"large": LARGE}
        ]


class _DeletingBetween(DurablePostgresSaver):
    """Deletes the thread between a read's two statements, every time: a client that
    keeps deleting (the read must still end, and in two passes)."""

    deleted = 0
    dsn = ""

    def _fetch_large_blobs(self, cur: Any, rows: Sequence[_core.CheckpointRow]) -> bool:
        self.deleted += 1
        with DurablePostgresSaver.from_conn_string(self.dsn) as other:
            other.delete_thread(rows[0]["thread_id"])
        return super()._fetch_large_blobs(cur, rows)


@pytest.mark.parametrize("call", ["get_tuple", "list"])
def test_a_checkpoint_deleted_between_the_statements_is_read_again(
    saver: DurablePostgresSaver, db_dsn: str, call: str
) -> None:
    config = _thread()
    _put(saver, config, {"large": LARGE}, 0)
    with _DeletingBetween.from_conn_string(db_dsn) as deleting:
        assert isinstance(deleting, _DeletingBetween)
        deleting.dsn = db_dsn
        if call == "get_tuple":
            assert deleting.get_tuple(config) is None
        else:
            assert list(deleting.list(config)) == []
        assert deleting.deleted == 1  # the read again took one statement


class _PuttingBetween(DurablePostgresSaver):
    """Puts the read checkpoint again under its id, with other values and versions,
    between the read's two statements, once."""

    racing: Any = None
    dsn = ""

    def _fetch_large_blobs(self, cur: Any, rows: Sequence[_core.CheckpointRow]) -> bool:
        if self.racing is not None:
            config, checkpoint = self.racing
            self.racing = None
            with DurablePostgresSaver.from_conn_string(self.dsn) as other:
                versions = checkpoint["channel_versions"]
                other.put(config, checkpoint, {"source": "loop", "step": 0}, versions)
        return super()._fetch_large_blobs(cur, rows)


def test_a_checkpoint_put_again_between_the_statements_is_read_whole(db_dsn: str) -> None:
    """The large blob is fetched by the version the first statement read: a re-put under
    the same id (upstream's upsert) cannot pair the old row with the new blob."""
    config = _thread()
    first = {"doc": "A" * 200_000}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"big": first, "small": "old"}
    checkpoint["channel_versions"] = {"big": "1", "small": "1"}
    with _PuttingBetween.from_conn_string(db_dsn) as saver:
        assert isinstance(saver, _PuttingBetween)
        saver.dsn = db_dsn
        stored = saver.put(
            config, checkpoint, {"source": "loop", "step": 0}, {"big": "1", "small": "1"}
        )
        again = {
            **checkpoint,
            "channel_values": {"big": {"doc": "B" * 200_000}, "small": "new"},
            "channel_versions": {"big": "2", "small": "2"},
        }
        saver.racing = (config, again)
        found = saver.get_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_versions"] == {"big": "1", "small": "1"}
    assert found.checkpoint["channel_values"] == {"big": first, "small": "old"}


def test_upstreams_empty_blobs_are_not_taken_for_large_ones() -> None:
    row: _core.CheckpointRow = {
        "thread_id": "t",
        "checkpoint_ns": "",
        "channel_values": [[b"gone", b"empty", None, None], [b"big", b"msgpack", None, b"2"]],
    }
    large = _core.large_blobs([row])
    assert large is not None
    assert large.params == {
        "thread_ids": ["t"],
        "checkpoint_nss": [""],
        "channels": ["big"],
        "versions": ["2"],
    }
    assert large.fill([(1, b"blob")])
    assert row["channel_values"][1] == [b"big", b"msgpack", b"blob", b"2"]
    assert _core.large_blobs([{**row, "channel_values": [[b"gone", b"empty", None, None]]}]) is None


def test_a_large_blob_at_a_numeric_version_reads_back(
    saver: DurablePostgresSaver, db_dsn: str
) -> None:
    """Versions may be JSON numbers (older savers, `InMemorySaver`'s). The blob is found by
    the version text the tuple's statement read from the JSON: `7.10` there, which
    Python would spell `7.1`."""
    config = _thread()
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"large": LARGE}
    checkpoint["channel_versions"] = {"large": 7}
    stored = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"large": 7})
    thread = config["configurable"]["thread_id"]
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, "
            "'{channel_versions,large}', '7.10'::jsonb) WHERE thread_id = %s",
            (thread,),
        )
        conn.execute("UPDATE checkpoint_blobs SET version = '7.10' WHERE thread_id = %s", (thread,))
    found = saver.get_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"large": LARGE}
