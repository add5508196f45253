"""langgraph-checkpoint-conformance, the public contract for savers, on both classes.

Every capability, base and extended, must be detected and pass: 8 of 8.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import CapabilityReport

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver


class SyncSaverDrivenAsync(DurablePostgresSaver):
    """Runs the conformance suite (which awaits) against the sync implementation.

    Each async method calls the sync one in a worker thread, so what is tested is the sync
    code path, not the async class.
    """

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        def collect() -> list[CheckpointTuple]:
            return list(self.list(config, filter=filter, before=before, limit=limit))

        for item in await asyncio.to_thread(collect):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _assert_all_pass(report: CapabilityReport) -> None:
    failures: Mapping[str, Any] = {
        name: result.failures
        for name, result in report.results.items()
        if not (result.detected and result.passed)
    }
    assert not failures, f"conformance failures: {failures}"
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert report.passed_all()


async def test_async_saver_passes_all_capabilities(db_dsn: str) -> None:
    @checkpointer_test(name="AsyncDurablePostgresSaver")
    async def factory() -> AsyncIterator[AsyncDurablePostgresSaver]:
        async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
            await saver.setup()
            yield saver

    _assert_all_pass(await validate(factory))


async def test_sync_saver_passes_all_capabilities(db_dsn: str) -> None:
    @checkpointer_test(name="DurablePostgresSaver")
    async def factory() -> AsyncIterator[DurablePostgresSaver]:
        def open_saver() -> tuple[Iterator[DurablePostgresSaver], DurablePostgresSaver]:
            manager = SyncSaverDrivenAsync.from_conn_string(db_dsn)
            saver = manager.__enter__()
            saver.setup()
            return manager, saver

        manager, saver = await asyncio.to_thread(open_saver)
        try:
            yield saver
        finally:
            await asyncio.to_thread(manager.__exit__, None, None, None)

    _assert_all_pass(await validate(factory))
