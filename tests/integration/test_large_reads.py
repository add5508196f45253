"""A blob over 128 KiB is read as a column of its own, not inside the tuple's array.

`select_tuple_columns` leaves such a blob out (NULL in its slot) and the saver fetches it
with `select_large_blobs` on the same cursor. Between the two statements the checkpoint
may be deleted (`delete_thread`, `prune`); the saver then reads again, so it returns the
thread as it is now, never a checkpoint without one of its values.
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
    assert slots["small"][2] is not None


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
    """Deletes the thread between a read's two statements, once: a concurrent
    `delete_thread` landing in that gap."""

    deleted = False

    def _fetch_large_blobs(self, cur: Any, rows: Sequence[_core.CheckpointRow]) -> bool:
        if not self.deleted:
            self.deleted = True
            with DurablePostgresSaver.from_conn_string(self.dsn) as other:
                other.delete_thread(rows[0]["thread_id"])
        return super()._fetch_large_blobs(cur, rows)

    dsn = ""


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
        assert deleting.deleted


def test_upstreams_empty_blobs_are_not_taken_for_large_ones() -> None:
    row: _core.CheckpointRow = {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c",
        "channel_values": [[b"gone", b"empty", None], [b"big", b"msgpack", None]],
    }
    large = _core.large_blobs([row])
    assert large is not None
    assert large.params == {
        "thread_ids": ["t"],
        "checkpoint_nss": [""],
        "checkpoint_ids": ["c"],
        "channels": ["big"],
    }
    assert large.fill([(1, b"blob")])
    assert row["channel_values"][1] == [b"big", b"msgpack", b"blob"]
    assert _core.large_blobs([{**row, "channel_values": [[b"gone", b"empty", None]]}]) is None


def test_a_large_blob_at_a_whole_number_version_reads_back(saver: DurablePostgresSaver) -> None:
    """Versions may be JSON numbers (older savers, `InMemorySaver`'s): the blob is found
    by the version text the checkpoint's JSON gives, as the tuple's statement finds it."""
    config = _thread()
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"large": LARGE}
    checkpoint["channel_versions"] = {"large": 7}
    stored = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"large": 7})
    found = saver.get_tuple(stored)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"large": LARGE}
