"""How each saver class answers calls of the other flavour.

LangGraph calls the async saver's sync methods from worker threads (sync nodes inside an
async run); those are bridged onto the saver's event loop. Called on that loop itself they
would deadlock, so they fail with a message naming the fix. The sync saver refuses every
async method the same way, instead of the bare `NotImplementedError` users otherwise get
from `ainvoke`.

This module is written by hand: the generator maps `SyncCallsViaLoop` in `aio.py` to
`RefusesAsyncCalls` in `sync.py`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, NoReturn, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_durable.checkpoint._loading import SafeLoadingSaver
from langgraph_durable.errors import WrongSaverClassError

__all__ = ["RefusesAsyncCalls", "SyncCallsViaLoop"]

T = TypeVar("T")


class SyncCallsViaLoop(SafeLoadingSaver):
    """Sync methods of the async saver: run the async ones on the saver's loop."""

    loop: asyncio.AbstractEventLoop

    async def acheck_schema(self) -> None:
        raise NotImplementedError

    async def adelete_idle_threads(
        self, older_than: timedelta, *, batch_size: int = 500
    ) -> builtins.list[str]:
        raise NotImplementedError

    def _run(self, coro: Awaitable[T], method: str) -> T:
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            if asyncio.iscoroutine(coro):
                coro.close()
            raise WrongSaverClassError(
                f"AsyncDurablePostgresSaver.{method}() was called on its own event loop, where "
                f"it would block forever. Use `await saver.a{method}(...)` and "
                "`graph.ainvoke`/`astream`, or use DurablePostgresSaver with `invoke`/`stream`."
            )

        async def wrapped() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result()

    def check_schema(self) -> None:
        self._run(self.acheck_schema(), "check_schema")

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(self.aget_tuple(config), "get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            found: AsyncIterator[CheckpointTuple] = self.alist(
                config, filter=filter, before=before, limit=limit
            )
            return [t async for t in found]

        yield from self._run(collect(), "list")

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(self.aput(config, checkpoint, metadata, new_versions), "put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run(self.aput_writes(config, writes, task_id, task_path), "put_writes")

    def delete_thread(self, thread_id: str) -> None:
        self._run(self.adelete_thread(thread_id), "delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(self.adelete_for_runs(run_ids), "delete_for_runs")

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(self.acopy_thread(source_thread_id, target_thread_id), "copy_thread")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run(self.aprune(thread_ids, strategy=strategy), "prune")

    def delete_idle_threads(
        self, older_than: timedelta, *, batch_size: int = 500
    ) -> builtins.list[str]:
        return self._run(
            self.adelete_idle_threads(older_than, batch_size=batch_size), "delete_idle_threads"
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._run(
            self.aget_delta_channel_history(config=config, channels=channels),
            "get_delta_channel_history",
        )


def _refuse(method: str) -> NoReturn:
    raise WrongSaverClassError(
        f"DurablePostgresSaver.a{method}() is not available: this saver is synchronous. "
        "With `ainvoke`/`astream` (or any `await saver.a...` call) use "
        "AsyncDurablePostgresSaver instead; keep DurablePostgresSaver for `invoke`/`stream`."
    )


class RefusesAsyncCalls(SafeLoadingSaver):
    """Async methods of the sync saver: refuse with the name of the class to use."""

    def setup(self) -> builtins.list[str]:
        raise NotImplementedError

    def check_schema(self) -> None:
        raise NotImplementedError

    def delete_idle_threads(
        self, older_than: timedelta, *, batch_size: int = 500
    ) -> builtins.list[str]:
        raise NotImplementedError

    async def asetup(self) -> builtins.list[str]:
        _refuse("setup")

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        _refuse("get_tuple")

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        _refuse("list")
        yield  # pragma: no cover - makes this an async generator like the real one

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        _refuse("put")

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        _refuse("put_writes")

    async def adelete_thread(self, thread_id: str) -> None:
        _refuse("delete_thread")

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        _refuse("delete_for_runs")

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        _refuse("copy_thread")

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        _refuse("prune")

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        _refuse("get_delta_channel_history")
