"""Large values are stored without the server writing a temporary file.

A set-returning function in FROM is materialised: `FROM unnest(...)` over the blob array of
a 50 MB channel value wrote 50 MB to a temporary file and read it back (put took 1.67x
upstream's time). Here the server refuses any temporary file (`temp_file_limit=0`) and
`work_mem` is 64 kB, so each write path must store a value 16x larger than `work_mem`
as it streams: a checkpoint's blob, writes parked for a put, writes stored alone, and
writes that replace earlier ones.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from psycopg.conninfo import make_conninfo

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

BIG = {"doc": "".join(f"{n:08d}" for n in range(128_000))}  # 1 MB of text, as a blob

ERROR = "__error__"  # a special write: it replaces what the task wrote before

NO_TEMP_FILES = "-c work_mem=64kB -c temp_file_limit=0"


def _checkpoint(saver: Any, value: Any) -> tuple[Any, dict[str, Any]]:
    checkpoint = empty_checkpoint()
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"big": value}
    checkpoint["channel_versions"] = {"big": version}
    return checkpoint, {"big": version}


def test_sync_saver_streams_large_values(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        setup.setup()
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        thread = f"large-{uuid.uuid4().hex}"
        first, versions = _checkpoint(saver, BIG)
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        stored = saver.put(config, first, {"source": "input", "step": -1}, versions)
        saver.put_writes(stored, [("big", BIG)], "task-regular")  # parked for the next put
        saver.put_writes(stored, [(ERROR, BIG["doc"])], "task-failed")  # stored alone
        saver.put_writes(stored, [(ERROR, BIG["doc"] + "!")], "task-failed")  # replaces
        second, versions = _checkpoint(saver, {"doc": BIG["doc"][::-1]})
        saver.put(stored, second, {"source": "loop", "step": 0}, versions)

        found = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert found is not None
        assert found.checkpoint["channel_values"]["big"] == {"doc": BIG["doc"][::-1]}
        earlier = saver.get_tuple(stored)
        assert earlier is not None
        assert earlier.checkpoint["channel_values"]["big"] == BIG
        writes = {(task, channel): value for task, channel, value in earlier.pending_writes}
        assert writes == {("task-regular", "big"): BIG, ("task-failed", ERROR): BIG["doc"] + "!"}


async def test_async_saver_streams_large_values(db_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(make_conninfo(db_dsn)) as setup:
        await setup.setup()
    dsn = make_conninfo(db_dsn, options=NO_TEMP_FILES)
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        thread = f"large-{uuid.uuid4().hex}"
        first, versions = _checkpoint(saver, BIG)
        config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        stored = await saver.aput(config, first, {"source": "input", "step": -1}, versions)
        await saver.aput_writes(stored, [("big", BIG)], "task-regular")
        await saver.aput_writes(stored, [(ERROR, BIG["doc"])], "task-failed")
        await saver.aput_writes(stored, [(ERROR, BIG["doc"] + "!")], "task-failed")
        second, versions = _checkpoint(saver, {"doc": BIG["doc"][::-1]})
        await saver.aput(stored, second, {"source": "loop", "step": 0}, versions)

        found = await saver.aget_tuple({"configurable": {"thread_id": thread}})
        assert found is not None
        assert found.checkpoint["channel_values"]["big"] == {"doc": BIG["doc"][::-1]}
        earlier = await saver.aget_tuple(stored)
        assert earlier is not None
        assert earlier.checkpoint["channel_values"]["big"] == BIG
        writes = {(task, channel): value for task, channel, value in earlier.pending_writes}
        assert writes == {("task-regular", "big"): BIG, ("task-failed", ERROR): BIG["doc"] + "!"}
