"""`AsyncDurablePostgresSaver`, the LangGraph checkpointer on Postgres.

Async source: the sync twin is generated from this file.

Compared with `AsyncPostgresSaver` from langgraph-checkpoint-postgres, on the same tables:

- no global lock: with a pool, calls for different threads run at once;
- each `put` and each `put_writes` is one transaction sent in one round trip (pipeline);
- a finished task's writes are parked for a moment and committed in the statement of the
  checkpoint that moves past them: one commit per step (`_parking.py`); writes stored on
  their own are waited for, so they are never younger than the checkpoint after them (I4);
- bad input fails with a named error before a connection is taken (invariant I8);
- `copy_thread`, `delete_for_runs`, a `DeltaChannel`-safe `prune`, idle-thread retention
  and a one-statement `get_delta_channel_history`.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from psycopg import AsyncConnection, AsyncPipeline, Capabilities
from psycopg.rows import DictRow, tuple_row
from typing_extensions import LiteralString

from langgraph_durable import _crashpoints, _guard, _langgraph, _telemetry
from langgraph_durable._db import (
    AsyncConn,
    AsyncConnectionSource,
    Timeout,
    acheck_schema,
    amigrate,
    aopen_pool,
    aretry_on_disconnect,
    register_source,
    timeout_settings,
)
from langgraph_durable._fencing import fence_token_of
from langgraph_durable._sql import QUERIES, put_checkpoint_statement
from langgraph_durable.checkpoint import _core
from langgraph_durable.checkpoint._bridge import SyncCallsViaLoop
from langgraph_durable.checkpoint._combining import LOCK_TIMEOUT_MS, AsyncPutCombiner, combined
from langgraph_durable.checkpoint._core import DEFAULT_REDACTION, MetadataRedaction
from langgraph_durable.checkpoint._events import (
    EMPTY_EVENT_PARAMS,
    EventParking,
    ParkedEvent,
    event_params,
)
from langgraph_durable.checkpoint._parking import (
    AsyncWriteParking,
    StoreAlone,
    WriteKey,
    writes_may_wait,
)
from langgraph_durable.checkpoint._retention import (
    PrunedNamespace,
    keep_latest_plan,
    kept_reasons,
    refuse_busy,
)
from langgraph_durable.errors import (
    ConfigurationError,
    InvalidInputError,
    TargetThreadNotEmptyError,
    UnknownPruneStrategyError,
    WrongArgumentTypeError,
)
from langgraph_durable.serde import encrypts

__all__ = ["AsyncDurablePostgresSaver", "adelete_for_runs_txn", "aput_txn", "aput_writes_txn"]

logger = logging.getLogger("langgraph_durable.checkpoint")


async def aput_txn(
    conn: AsyncConnection[DictRow],
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    serde: SerializerProtocol,
    redaction: MetadataRedaction = DEFAULT_REDACTION,
) -> RunnableConfig:
    """Store a checkpoint inside the caller's transaction; upstream's rows, one statement.

    For code that must commit a checkpoint together with rows of its own (an event to
    announce it, a run's status): both commit or neither does. The caller commits; the
    statement makes that commit synchronous. Writes parked in a running saver are not
    taken: use the saver's `put` inside graphs.

    Returns:
        The config of the stored checkpoint, as `put` returns it.
    """
    row, blob_values = _core.checkpoint_row(
        config,
        checkpoint,
        metadata,
        inline_values=not encrypts(serde),
        redaction=redaction,
    )
    params = {
        **row,
        **_core.blob_params(serde, blob_values, new_versions),
        **_core.parked_write_params(()),
        "synchronous_commit": "on",
    }
    cur = await conn.execute(*put_checkpoint_statement(params))
    _core.check_fenced(cur.rowcount == 1, params)
    return _core.config_of(row)


async def aput_writes_txn(
    conn: AsyncConnection[DictRow],
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
    *,
    serde: SerializerProtocol,
) -> None:
    """Store a task's writes against a checkpoint inside the caller's transaction."""
    if not writes:
        return
    query = _core.writes_statement(config, writes, events=False)
    params = _core.write_params(serde, config, writes, task_id, task_path)
    found = await (await conn.execute(query, params)).fetchone()
    _core.check_fenced(bool(found and found["ok"]), params)


async def adelete_for_runs_txn(conn: AsyncConnection[DictRow], run_ids: Sequence[str]) -> None:
    """`delete_for_runs` inside the caller's transaction (a rollback of a run, say)."""
    if isinstance(run_ids, str):
        raise WrongArgumentTypeError("run_ids must be a list of run ids, not one string.")
    ids = [str(r) for r in run_ids]
    if not ids:
        return
    cur = await conn.execute(QUERIES["delete_runs"], {"run_ids": ids})
    await _adelete_unreferenced(conn, await cur.fetchall())


async def _adelete_unreferenced(
    conn: AsyncConnection[DictRow], freed: Sequence[Mapping[str, Any]]
) -> None:
    """Delete the blobs among `freed` that no remaining checkpoint names."""
    if not freed:
        return
    await conn.execute(
        QUERIES["delete_unreferenced_blobs"],
        {
            "thread_ids": [r.get("thread_id") for r in freed],
            "namespaces": [r.get("checkpoint_ns") for r in freed],
            "channels": [r["channel"] for r in freed],
            "versions": [r["version"] for r in freed],
        },
    )


async def _aprune_namespace(
    conn: AsyncConnection[DictRow], thread_id: str, plan: PrunedNamespace
) -> None:
    """keep_latest for one namespace, as `keep_latest_plan` planned it from the heads read.

    The thread may be running: checkpoints it commits after the heads were read are newer
    than the head and are left alone (each statement below sees them under read committed),
    so only what was already history when the heads were read is deleted.
    """
    kept = list(plan.kept)
    if plan.delta_channels:
        chain = await conn.execute(
            QUERIES["delta_history"],
            {
                "thread_id": thread_id,
                "checkpoint_ns": plan.checkpoint_ns,
                "checkpoint_id": plan.head,
                "channels": list(plan.delta_channels),
                "chain_only": True,
            },
        )
        kept += [
            r["checkpoint_id"] for r in await chain.fetchall() if r["checkpoint_id"] not in kept
        ]
    params = {
        "thread_id": thread_id,
        "checkpoint_ns": plan.checkpoint_ns,
        "head": plan.head,
        "kept": kept,
    }
    freed = await (await conn.execute(QUERIES["prune_delete_checkpoints"], params)).fetchall()
    await conn.execute(QUERIES["prune_cut_parents"], params)
    # Only versions the deleted checkpoints named are candidates, and each goes only if no
    # checkpoint left names it, a newer one included.
    await _adelete_unreferenced(
        conn,
        [{**r, "thread_id": thread_id, "checkpoint_ns": plan.checkpoint_ns} for r in freed],
    )


class AsyncDurablePostgresSaver(SyncCallsViaLoop):
    """A LangGraph checkpointer on Postgres that survives crashes and restarts.

    Use it where you would use `AsyncPostgresSaver`; it reads and writes the same tables.

    Example:
        ```python
        async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke(inputs, {"configurable": {"thread_id": "t-1"}})
        ```

    Args:
        conn: A psycopg `AsyncConnectionPool` (recommended: calls run concurrently) or one
            `AsyncConnection` (calls are serialised on it).
        pipe: A pipeline of `conn` (single connection only), as upstream accepts; each call
            is synced before it returns, so errors surface at the call that caused them.
            Every operation is already one round trip, so a pipeline saves little.
        serde: The serializer; defaults to LangGraph's `JsonPlusSerializer`.
        async_commit: Commit checkpoints without waiting for the WAL flush. Safe against a
            worker crash; a server crash can lose the last few hundred milliseconds of
            checkpoints. Writes of finished tasks keep synchronous commits.
        write_linger: Seconds a finished task's writes wait for the checkpoint that follows
            them, to be committed in its statement (one commit per step instead of two).
            LangGraph sends that checkpoint well within the default 2 ms (counted from
            when the checkpoint the writes belong to is stored; longer, up to 25 lingers,
            while checkpoints come late on a busy loop). `put_writes` returns as soon as
            they wait; writes the checkpoint does not take in time are stored on their own
            within two lingers, and that thread's writes do not wait during its next 64
            checkpoints (a fan-out wider than the executor, `max_concurrency=1`). An error
            or an interrupt stores the writes waiting beside it before it returns, and a
            read of a thread stores that thread's first; see `aflush_writes`.
            0 stores every write on its own.
        lock_timeout: How long one statement of this saver (and of the effect journal and
            run registry made on it) may wait for a lock another session holds, in seconds
            or as a timedelta, before it fails with `LockTimeoutError` and writes nothing.
            None (default) keeps the session's own setting (DSN options, role, database),
            which by default waits as long as the lock is held, as upstream does.
        statement_timeout: How long one statement may run before it fails with
            `StatementTimeoutError`; None (default) keeps the session's own setting.
            Both are set on each connection's session the first time the saver uses it
            (connections of a pool you share with other code keep them); `setup()` runs
            under the session's own settings.
        metadata_redaction: Which checkpoint metadata values are stored as "[redacted]":
            LangGraph copies every plain `configurable` value into the metadata, which is
            clear text even with an encrypting serializer (it stays queryable). By default
            keys that sound secret (`api_key`, `access_token`, `password`, ...) are
            redacted, counts and limits of tokens (`max_tokens`, `token_count`) are not;
            `MetadataRedaction(allow={"session_token"})` keeps named keys,
            `MetadataRedaction(redact=...)` decides by your own rule.

    With an encrypting serializer (`EncryptedSerializer`, `SafeEncryptedSerializer`) every
    channel value is stored encrypted in `checkpoint_blobs`, including the strings and
    numbers upstream keeps in the checkpoint's JSON; upstream reads such rows all the same.
    """

    def __init__(
        self,
        conn: AsyncConn,
        pipe: AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        async_commit: bool = False,
        write_linger: float = 0.002,
        lock_timeout: Timeout = None,
        statement_timeout: Timeout = None,
        metadata_redaction: MetadataRedaction = DEFAULT_REDACTION,
    ) -> None:
        super().__init__(serde=serde)
        self.metadata_redaction = metadata_redaction
        if not 0 <= write_linger <= 1:
            raise ConfigurationError(
                f"write_linger={write_linger!r}: pass seconds between 0 and 1 (default 0.002)."
            )
        self._source = AsyncConnectionSource(
            conn, pipe, lock_timeout=lock_timeout, statement_timeout=statement_timeout
        )
        register_source(self, self._source)
        self.conn = conn
        self.pipe = pipe
        # Upstream's attributes, for code written against it: `lock` serialises calls on a
        # single connection (with a pool, calls need no lock and this one is never taken).
        self.lock = self._source.lock
        self.supports_pipeline = Capabilities().has_pipeline()
        self.async_commit = async_commit
        # Checkpoints committed asynchronously must not carry writes, which commit durably.
        # Nor may they take writes that failed alone (hand-over, `_parking.py`).
        self._parking = AsyncWriteParking(
            0 if async_commit else write_linger, hand_over=not async_commit
        )
        # Channel names seen as DeltaChannels in checkpoints: LangGraph waits for their
        # writes before it saves the next checkpoint, so they are never parked.
        self._delta_channels: set[str] = set()
        # Final checkpoints of runs under durability="exit": writes for them come after.
        self._exit_checkpoints: set[WriteKey] = set()
        # (thread, namespace) whose last put was rejected, with that checkpoint's id: under
        # durability="async" LangGraph runs the next tasks anyway, and their writes must
        # not land against it or the checkpoints after it, which will never exist. Writes
        # against older checkpoints are stored (a later run resumed from one of them).
        # Cleared when a put of a newer checkpoint starts: LangGraph puts nothing more in
        # the run whose put failed, so that put is another run's.
        self._rejected: dict[tuple[str, str], tuple[str, type[InvalidInputError], str]] = {}
        # Outbox events emitted by running tasks, stored with those tasks' writes (I7).
        self._events = EventParking()
        # Puts that find every connection busy go together, in one statement (`_combining`).
        self._combiner = AsyncPutCombiner(self._source, self._astore_one, self._astore_many)
        self._regular_writes_alone = self._astore_regular_writes  # one bound method, kept
        self.loop = asyncio.get_running_loop()  # async-only

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        max_connections: int = 10,
        connect_timeout: float = 10.0,
        pool_timeout: float = 30.0,
        async_commit: bool = False,
        write_linger: float = 0.002,
        lock_timeout: Timeout = None,
        statement_timeout: Timeout = None,
        metadata_redaction: MetadataRedaction = DEFAULT_REDACTION,
    ) -> AsyncIterator[AsyncDurablePostgresSaver]:
        """Open a saver on a checked connection pool; closes the pool on exit.

        Args:
            conn_string: A libpq DSN or URI.
            pipeline: Accepted for upstream's call shape; has no effect, because every
                operation of this saver is already a single round trip.
            serde: The serializer; defaults to LangGraph's `JsonPlusSerializer`.
            max_connections: Pool size: how many calls can run at once. Size it by the
                database server's cores, not by your threads or runs: on a 2-core server
                4 per process served 16 threads as fast as 16, and 4 processes faster
                (README, "Pool size").
            connect_timeout: Seconds to wait for the first connection before raising
                `DatabaseUnreachableError`.
            pool_timeout: Seconds a call waits for a connection (the server is down, or
                every connection is busy) before raising `PoolTimeoutError`, which names
                the server and which of the two it was. The pool reconnects by itself,
                trying at least every two seconds, so calls made once the server is back
                succeed.
            async_commit: See the class docstring.
            write_linger: See the class docstring.
            lock_timeout: See the class docstring.
            statement_timeout: See the class docstring.
            metadata_redaction: See the class docstring.
        """
        del pipeline  # one round trip per operation already
        # Refused before a pool is opened: a typo must not wait for a connection.
        timeout_settings(lock_timeout=lock_timeout, statement_timeout=statement_timeout)
        pool = await aopen_pool(
            conn_string,
            max_size=max_connections,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
        )
        try:
            saver = cls(
                pool,
                serde=serde,
                async_commit=async_commit,
                write_linger=write_linger,
                lock_timeout=lock_timeout,
                statement_timeout=statement_timeout,
                metadata_redaction=metadata_redaction,
            )
        except BaseException:
            await pool.close()
            raise
        try:
            yield saver
        finally:
            try:
                await saver.aflush_writes()
            finally:
                await pool.close()

    async def aflush_writes(self) -> None:
        """Store now the task writes still parked for a checkpoint.

        A task's writes wait a moment for the next checkpoint, which commits them (see
        `write_linger`); the call that handed them over has returned. A run that ends
        without a checkpoint after them and without an error or interrupt (a stream
        closed early, an invalid update) leaves them to be stored within two lingers, or
        by the next read of their thread. Call this before you close a pool or connection
        you passed to the saver, or before the event loop ends; `from_conn_string` calls
        it before closing its own pool.
        """
        await self._parking.flush()

    async def setup(self) -> builtins.list[str]:
        """Create or migrate the tables; idempotent and safe from many processes at once.

        Called as upstream's is: awaited on the async saver (where `asetup` is an alias),
        plainly on the sync one.

        Returns:
            The names of the migrations applied by this call (empty when up to date).

        Raises:
            SchemaTooNewError: A newer langgraph-durable migrated this database.
        """
        async with self._source.connection("setting up the tables", timeouts=False) as conn:
            if conn.autocommit:
                applied = await amigrate(conn)
            else:
                # A connection of a pool made without autocommit (a single connection
                # without it is refused when the saver is made): lent to this call only,
                # in autocommit for the migrations (index builds run CONCURRENTLY, outside
                # any transaction), then given back as it was.
                await conn.commit()
                await conn.set_autocommit(True)
                try:
                    applied = await amigrate(conn)
                finally:
                    await conn.set_autocommit(False)
        if applied:
            logger.info("langgraph-durable applied migrations: %s", ", ".join(applied))
        return applied

    asetup = setup  # async-only

    async def acheck_schema(self) -> None:
        """Raise `SchemaNotReadyError` or `SchemaTooNewError` unless the schema fits."""
        async with self._source.connection() as conn:
            await acheck_schema(conn)

    @aretry_on_disconnect
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by `config`, or the thread's latest when it names none."""
        thread_id, checkpoint_ns, checkpoint_id = _core.target(config)
        if checkpoint_ns:
            _core.note_subgraph_entry(config)
        await self._parking.flush_thread(thread_id, checkpoint_ns)
        query = "select_tuple_exact" if checkpoint_id else "select_tuple_latest"
        params = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
        async with (
            self._source.connection("reading a checkpoint (get_tuple)") as conn,
            conn.cursor(binary=True, row_factory=tuple_row) as cur,
        ):
            await cur.execute(QUERIES[query], params)
            found = await cur.fetchone()
            if found is not None and not await self._afetch_large_blobs(
                cur, [_core.tuple_row_of(found)]
            ):
                await cur.execute(QUERIES[f"{query}_whole"], params)
                found = await cur.fetchone()
            if found is None:
                return None
            row = _core.tuple_row_of(found)
            if _core.needs_sends_migration(row):
                await self._amigrate_sends(cur, [row])
        return _core.load_tuple(self.serde, row)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints matching the filters, newest first.

        Args:
            config: Restricts to a thread, and to a namespace and checkpoint when given.
            filter: Metadata that the checkpoints' metadata must contain.
            before: Only checkpoints older than this one.
            limit: At most this many.
        """
        wheres: list[LiteralString] = []
        params: dict[str, Any] = {}
        order = QUERIES["list_order_any"]
        if config is not None:
            configurable = config.get("configurable") or {}
            if "thread_id" in configurable:
                params["thread_id"] = _core.thread_id_of(configurable["thread_id"])
                await self._parking.flush_thread(params["thread_id"])
                wheres.append(QUERIES["list_thread"])
                order = QUERIES["list_order_thread"]
                if configurable.get("checkpoint_ns") is not None:
                    params["checkpoint_ns"] = _core.thread_id_of(
                        configurable["checkpoint_ns"], "checkpoint_ns"
                    )
                    if params["checkpoint_ns"]:  # a subgraph replayed from an earlier step
                        _core.note_subgraph_entry(config)
                    # A range walks the namespace in the primary key's order (queries.sql,
                    # `where_latest`); before a checkpoint id, `=` lets the scan stop there.
                    exact = bool(configurable.get("checkpoint_id"))
                    wheres.append(QUERIES["list_namespace_exact" if exact else "list_namespace"])
                    order = QUERIES["list_order_thread_namespace"]
            if configurable.get("checkpoint_id"):
                params["checkpoint_id"] = _core.thread_id_of(
                    configurable["checkpoint_id"], "checkpoint_id"
                )
                wheres.append(QUERIES["list_checkpoint_id"])
        if filter:
            params["metadata"] = _core.metadata_filter(filter)
            wheres.append(QUERIES["list_metadata"])
        if before is not None:
            before_id = (before.get("configurable") or {}).get("checkpoint_id")
            if before_id:
                params["before"] = _core.thread_id_of(before_id, "before's checkpoint_id")
                wheres.append(QUERIES["list_before"])
        tail: LiteralString = ""
        if wheres:
            tail = "\nWHERE " + "\n    AND ".join(wheres)
        tail = tail + "\n" + order
        checked_limit = _core.list_limit(limit)
        if checked_limit is not None:
            params["limit"] = checked_limit
            tail = tail + "\n" + QUERIES["list_limit"]
        queries = (
            QUERIES["select_tuple_columns"] + tail,
            QUERIES["select_tuple_columns_whole"] + tail,
        )
        # Prepared unless filtered by metadata (see `_afetch_rows`).
        for row in await self._afetch_rows(queries, params, prepare=not filter):
            yield _core.load_tuple(self.serde, row)

    @aretry_on_disconnect
    async def _afetch_rows(
        self,
        queries: tuple[LiteralString, LiteralString],
        params: dict[str, Any],
        *,
        prepare: bool,
    ) -> builtins.list[_core.CheckpointRow]:
        """The rows of a `list` statement (the statement, and the same with every blob
        inside its array: read again with it if a large blob went missing); `prepare`
        False for one the server must plan for its values every time.

        A generic plan knows only the average thread. With a metadata filter it sorts a
        whole huge thread instead of walking its index, so those lists are never prepared.
        The others are walked in an index's order by either plan: a thread alone in the
        (thread, checkpoint) index's, a namespace in the primary key's (`list_namespace`
        in queries.sql says how). Planning them on every call cost about a quarter of a
        `list(limit=10)` on a thread of 100 checkpoints (both plans:
        tests/integration/test_query_plans.py).
        """
        async with (
            self._source.connection("listing checkpoints (list)") as conn,
            conn.cursor(binary=True, row_factory=tuple_row) as cur,
        ):
            await cur.execute(queries[0], params, prepare=None if prepare else False)
            rows = [_core.tuple_row_of(found) for found in await cur.fetchall()]
            if not await self._afetch_large_blobs(cur, rows):
                await cur.execute(queries[1], params, prepare=None if prepare else False)
                rows = [_core.tuple_row_of(found) for found in await cur.fetchall()]
            if to_migrate := [r for r in rows if _core.needs_sends_migration(r)]:
                await self._amigrate_sends(cur, to_migrate)
        return rows

    async def _afetch_large_blobs(self, cur: Any, rows: Sequence[_core.CheckpointRow]) -> bool:
        """Fetch the blobs the read left out of `rows` for their size, on the read's own
        cursor; False when one is gone: deleted with its checkpoint since the read (by
        `delete_thread`, `delete_for_runs` or `prune`: a blob goes only with the last
        checkpoint naming it). The caller then reads again in one statement with every
        blob inside the array (`*_whole`), which cannot miss one: a bounded retry that
        sees the thread as it is now, where reading the same way again could miss again
        for as long as another client keeps deleting."""
        large = _core.large_blobs(rows)
        if large is None:
            return True
        await cur.execute(QUERIES["select_large_blobs"], large.params)
        return large.fill(await cur.fetchall())

    async def _amigrate_sends(self, cur: Any, rows: Sequence[_core.CheckpointRow]) -> None:
        """Fold pending sends of pre-v4 parents into `rows` (old threads only), on the
        read's own cursor, which reads tuples: (checkpoint_id, sends)."""
        for row in rows:
            await cur.execute(
                QUERIES["select_pending_sends"],
                {
                    "thread_id": row["thread_id"],
                    "checkpoint_ns": row["checkpoint_ns"],
                    "checkpoint_ids": [row["parent_checkpoint_id"]],
                },
            )
            found = await cur.fetchone()
            if found is not None:
                _, sends = found
                _core.migrate_pending_sends(
                    self.serde, row, sends, self.get_next_version(None, None)
                )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, the new versions of its channels and parked writes at once.

        Takes the writes parked against the checkpoint this one moves past (or against
        itself, as at exit) into its statement, and waits for those being stored on their own,
        so that a crash can never leave a checkpoint ahead of its tasks' results.
        """
        try:
            row, blob_values = _core.checkpoint_row(
                config,
                checkpoint,
                metadata,
                inline_values=not encrypts(self.serde),
                redaction=self.metadata_redaction,
            )
            params = {
                **row,
                **_core.blob_params(self.serde, blob_values, new_versions),
                "synchronous_commit": "off" if self.async_commit else "on",
            }
        except InvalidInputError as exc:
            key = _core.rejected_key(config)
            if key is not None:
                if len(self._rejected) > 1024:
                    self._rejected.clear()
                # The error's type and text only: the exception's traceback holds the
                # run's frames (its state, LangGraph's loop) for as long as the entry lives.
                self._rejected[key] = (str(checkpoint.get("id", "")), type(exc), str(exc))
            raise
        if self._rejected:
            rejected = self._rejected.get((row["thread_id"], row["checkpoint_ns"]))
            if rejected is not None and row["checkpoint_id"] > rejected[0]:
                del self._rejected[(row["thread_id"], row["checkpoint_ns"])]
        self._delta_channels.update(_core.delta_channel_names(metadata, blob_values))
        own: WriteKey = (row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"])
        keys = [own]
        if row["parent_checkpoint_id"]:
            keys.append((own[0], own[1], row["parent_checkpoint_id"]))
        events_pending: Callable[[], bool] | None = None
        if _langgraph.durability_of(config) == "exit":
            # At exit LangGraph submits the final checkpoint and then its pending writes.
            # Letting the writes that already started go first (they are waited for, or
            # taken) means a reader does not see the checkpoint without them. Writes that
            # arrive later are not parked: no later checkpoint would take them.
            if len(self._exit_checkpoints) >= 1024:
                self._exit_checkpoints.clear()
            self._exit_checkpoints.add(own)
            if _langgraph.has_work_left(checkpoint["channel_values"]):
                # Only a run that stopped early (interrupt, error) has pending writes. Yield
                # once: they are scheduled (async) or being submitted (threads). A finished
                # run has none and does not pay for the yield: in the sync saver giving
                # up the GIL cost 0.2 ms alone, more when LangGraph's thread took it.
                await asyncio.sleep(0)
            exit_events = self._events.take_for_exit(*own, fence_token=row["fence_token"])
        else:
            exit_events = []
            if (
                len(keys) > 1
                and metadata.get("source") == "loop"
                and self._events.has_for_checkpoint(own[0], keys[1][2], row["fence_token"])
            ):
                # A task of the step has outbox events its `put_writes`, submitted before
                # this put but not started yet, has not taken: this checkpoint holds the
                # task's result, so it waits for them (I7). Only a step's checkpoint: an
                # input checkpoint moves past tasks that did not all finish (a run
                # cancelled mid-task leaves events parked that must never commit).
                events_pending = functools.partial(
                    self._events.has_for_checkpoint, own[0], keys[1][2], row["fence_token"]
                )
        async with self._parking.carried_by_put(
            keys, fence_token=row["fence_token"], events_pending=events_pending
        ) as taken:
            params.update(_core.parked_write_params([entry.params for entry in taken]))
            if exit_events:
                for name, values in event_params(exit_events).items():
                    params[name] = params[name] + values
            # Awaited here, not in a helper: each coroutine in the chain is a container
            # alive across the statement (see `_parking.AsyncWriteParking._putting`).
            if not _telemetry.tracing():  # no span to make: not even its attributes
                await self._combiner.store(params)
            else:
                with _telemetry.span("langgraph_durable.step", _core.step_span_attributes(params)):
                    await self._combiner.store(params)
            for _ in taken:  # each task's writes committed with the checkpoint
                _crashpoints.reached("put_writes:after_commit")
        return _core.config_of(row)

    @aretry_on_disconnect
    async def _astore_one(self, params: dict[str, Any]) -> None:
        """One checkpoint in a statement of its own (`_combining.py`: while a connection
        is free, or for a put that cannot share one)."""
        async with self._source.connection("storing a checkpoint (put)") as conn:
            # Tuple rows: a dict row factory reads the result's column names on every
            # execute, and this statement returns no row.
            cur = conn.cursor(row_factory=tuple_row)
            await cur.execute(*put_checkpoint_statement(params))
            _crashpoints.reached("put:after_commit")
        _core.check_fenced(cur.rowcount == 1, params)

    @aretry_on_disconnect
    async def _astore_many(self, batch: Sequence[dict[str, Any]]) -> None:
        """Several threads' checkpoints in one statement (`_combining.py`)."""
        async with self._source.connection("storing checkpoints (put)") as conn:
            cur = conn.cursor(row_factory=tuple_row)
            lock_ms = self._source.timeouts.get("lock_timeout", LOCK_TIMEOUT_MS)
            await cur.execute(*combined(batch, min(lock_ms, LOCK_TIMEOUT_MS)))
            _crashpoints.reached("put:after_commit")

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against a checkpoint, durably, in one transaction.

        Regular writes wait up to `write_linger` for the next checkpoint to carry them;
        writes LangGraph waits for (errors, interrupts, resumes, `DeltaChannel` writes) are
        stored at once.
        """
        key = _core.write_key(config)
        if any(channel == INTERRUPT for channel, _ in writes):
            _guard.interrupt_written(task_id)
        if not writes and not self._events.has_for_checkpoint(
            key[0], key[2], fence_token_of(config)
        ):
            return  # nothing to store (a task that wrote only untracked channels)
        rejected = self._rejected.get(key[:2]) if self._rejected else None
        if rejected is not None and key[2] >= rejected[0]:
            # Not stored: the task's events go too (a put past its checkpoint would wait).
            self._events.take_for_task(key[0], key[2], task_id, fence_token=fence_token_of(config))
            raise rejected[1](
                f"put_writes: checkpoint {key[2]} follows a checkpoint put rejected "
                f"({rejected[2]}); these writes were not stored either."
            )
        ends_step = any(channel in (ERROR, INTERRUPT) for channel, _ in writes)

        def prepare() -> tuple[bool, dict[str, Any]]:
            # The task's outbox events commit with its writes; writes that say it did not
            # finish (an error, an interrupt) void them: it runs again and emits them
            # again. Taken here, once the call counts as busy: a put that starts now
            # waits for these writes, one that started earlier took the events (I7).
            events = self._events.take_for_task(
                key[0], key[2], task_id, fence_token=fence_token_of(config)
            )
            params = _core.write_params(self.serde, config, writes, task_id, task_path, key)
            params.update(event_params(events) if events and not ends_step else EMPTY_EVENT_PARAMS)
            park = writes_may_wait(
                config,
                writes,
                self._delta_channels,
                final_checkpoint=key in self._exit_checkpoints,
            )
            if park:
                _crashpoints.reached("put_writes:parked")
            return park, params

        store_alone: StoreAlone
        if _core.replaces_earlier(writes):  # special writes: never parked

            async def store_alone(params: dict[str, Any]) -> None:
                query = _core.writes_statement(config, writes, events=bool(params["e_ids"]))
                await self._astore_writes(query, params)
                _crashpoints.reached("put_writes:after_commit")

        else:
            store_alone = self._regular_writes_alone

        # Parked writes return at once: the put that carries them commits them (and
        # reaches "put_writes:after_commit" for them), or the parking stores them alone.
        await self._parking.store(key, prepare, store_alone, ends_step=ends_step)

    def park_event(self, event: ParkedEvent) -> None:
        """Park an outbox event of a running task until its writes are stored (`emit()`)."""
        self._events.park(event)

    async def _astore_regular_writes(self, params: dict[str, Any]) -> None:
        """Stores a task's regular writes alone, by what `params` says alone: parked writes
        keep this until a put takes them, where a closure per call kept a function and a
        cell per variable alive across the put's statement."""
        await self._astore_writes(_core.regular_writes_statement(params), params)
        _crashpoints.reached("put_writes:after_commit")

    @aretry_on_disconnect
    async def _astore_writes(self, query: LiteralString, params: dict[str, Any]) -> None:
        async with self._source.connection("storing a task's writes (put_writes)") as conn:
            cur = conn.cursor(row_factory=tuple_row)  # one boolean: no dict for it
            await cur.execute(query, params)
            found = await cur.fetchone()
        _core.check_fenced(bool(found and found[0]), params)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread, in one transaction: its checkpoints, writes and blobs, the journal
        rows of its finished default-keyed effects, and its run registry row when no run
        names it.

        With the journal rows goes what they remember: a run on the same thread id acts
        again where the deleted thread acted (its default effect keys are built from the
        thread id). Business-keyed rows (`key=`) stay: another thread may share the key and
        must replay it, not act again. The runs of the thread stay, as history.

        A run interrupted on the thread does not keep it: its question dies with the
        thread (the run stays `interrupted` in the registry, as history; answer it first
        if it still matters). So does a run superseded by a newer one
        (`multitask_strategy="interrupt"`), which can be neither resumed nor cancelled.

        Raises:
            ThreadBusyError: The thread has work in flight: a pending, running, deferred or
                blocked run, an effect whose outcome is open (running or unknown: its
                receiver may have acted; only its row says so), or a live thread lease.
                Nothing was deleted.
        """
        thread_id = _core.thread_id_of(thread_id)
        await self._parking.flush_thread(thread_id)  # none stored after the delete
        refuse_busy(await self._adelete_threads([thread_id]))

    @aretry_on_disconnect
    async def _adelete_threads(
        self, thread_ids: Sequence[str], *, idle_before: datetime | None = None
    ) -> builtins.list[DictRow]:
        """`delete_threads` under the threads' locks: one row per thread, `deleted` or why
        not. Without `idle_before` all or none go; with it, each idle one goes."""
        params = {
            "thread_ids": sorted(set(thread_ids)),
            "idle_before": idle_before,
            "all_or_none": idle_before is None,
        }
        async with self._source.connection("deleting threads") as conn, conn.transaction():
            await conn.execute(QUERIES["lock_threads"], params)
            await conn.execute(QUERIES["lock_thread_rows"], params)
            cur = await conn.execute(QUERIES["delete_threads"], params)
            return await cur.fetchall()

    @aretry_on_disconnect
    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes and unshared blobs) of the given runs.

        A `DeltaChannel` that still needs a deleted checkpoint's writes cannot be rebuilt
        afterwards; delete whole threads (or `prune`) for threads that use one.
        """
        async with self._source.connection("deleting runs") as conn, conn.transaction():
            await adelete_for_runs_txn(conn, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of a thread into a new, empty thread.

        The whole parent chain is copied, so `DeltaChannel` state rebuilds on the copy.

        Raises:
            TargetThreadNotEmptyError: The target thread already has checkpoints.
        """
        params = {
            "source": _core.thread_id_of(source_thread_id),
            "target": _core.stored_id(target_thread_id, "thread_id"),
        }
        if params["source"] == params["target"]:
            raise InvalidInputError("copy_thread needs two different thread ids.")
        await self._parking.flush_thread(params["source"])  # the copy holds them too
        async with self._source.connection("copying a thread") as conn, conn.transaction():
            await conn.execute(QUERIES["lock_thread"], {"thread_id": params["target"]})
            cur = await conn.execute(
                QUERIES["thread_has_checkpoints"], {"thread_id": params["target"]}
            )
            found = await cur.fetchone()
            if found is not None and found["found"]:
                raise TargetThreadNotEmptyError(
                    f"copy_thread: thread {params['target']!r} already has checkpoints; delete "
                    "it first or pick a new thread id. Nothing was copied."
                )
            await conn.execute(QUERIES["copy_thread_checkpoints"], params)
            await conn.execute(QUERIES["copy_thread_blobs"], params)
            await conn.execute(QUERIES["copy_thread_writes"], params)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads.

        Args:
            thread_ids: The threads to prune.
            strategy: `"keep_latest"` keeps what upstream's keeps: the latest checkpoint of
                each namespace with its writes and blobs, plus the parent a checkpoint
                older than format v4 reads its pending sends from; a subgraph call's
                namespace goes whole once the root checkpoint it started from is saved
                and no longer kept (a call waiting at an interrupt stays, as does a
                `checkpointer=True` subgraph's latest). Beyond upstream, it keeps the
                ancestors (and their writes) that `DeltaChannel`s need to rebuild, and
                anything a running thread commits meanwhile. `"delete"` removes the
                threads entirely, as `delete_thread` does (all or none; an interrupted
                run's question dies with its thread).
        """
        if isinstance(thread_ids, str):
            raise WrongArgumentTypeError("thread_ids must be a list of thread ids, not one string.")
        if strategy not in _core.PRUNE_STRATEGIES:
            raise UnknownPruneStrategyError(
                f"Unknown prune strategy {strategy!r}: use one of {_core.PRUNE_STRATEGIES}."
            )
        ids = [_core.thread_id_of(t) for t in thread_ids]
        for thread_id in ids:  # none stored after the prune
            await self._parking.flush_thread(thread_id)
        if not ids:
            return
        if strategy == "delete":
            refuse_busy(await self._adelete_threads(ids))
            return
        for thread_id in ids:
            await self._akeep_latest(thread_id)

    @aretry_on_disconnect
    async def _akeep_latest(self, thread_id: str) -> None:
        async with self._source.connection("pruning a thread") as conn, conn.transaction():
            await conn.execute(QUERIES["lock_thread"], {"thread_id": thread_id})
            cur = await conn.execute(QUERIES["thread_heads"], {"thread_id": thread_id})
            for plan in keep_latest_plan(await cur.fetchall()):
                await _aprune_namespace(conn, thread_id, plan)

    async def adelete_idle_threads(
        self, older_than: timedelta, *, batch_size: int = 500
    ) -> builtins.list[str]:
        """Delete threads whose newest checkpoint is older than `older_than`.

        Each goes as `delete_thread` deletes it, its finished default-keyed effects'
        journal rows included. Skipped, and left whole, are threads that wait at an
        interrupt (an approval), have an unfinished run (pending, running, interrupted,
        deferred, blocked) or an effect whose outcome is open (running, unknown), or a live
        thread lease. Each thread is judged again in the transaction that deletes it,
        under its locks: one that became active since it was listed stays.

        Works in batches, logging progress; whole threads go, so `DeltaChannel` chains are
        never cut.

        Returns:
            The deleted thread ids, oldest activity first.
        """
        if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
            raise InvalidInputError(f"older_than={older_than!r}: pass a positive timedelta.")
        try:
            cutoff = datetime.now(timezone.utc) - older_than
        except OverflowError:  # before the year 1: no thread is that old
            return []
        deleted: builtins.list[str] = []
        kept = 0
        after: dict[str, Any] = {"after_ts": None, "after_id": None}
        while True:
            async with self._source.connection("listing idle threads") as conn:
                cur = await conn.execute(
                    QUERIES["idle_threads"], {"cutoff": cutoff, "batch": batch_size, **after}
                )
                page = await cur.fetchall()
            if not page:
                return deleted
            # The next page starts past this one: the threads kept here are listed once.
            after = {"after_ts": page[-1]["last_ts"], "after_id": page[-1]["thread_id"]}
            ids = [r["thread_id"] for r in page]
            judged = {
                r["thread_id"]: r for r in await self._adelete_threads(ids, idle_before=cutoff)
            }
            for thread_id in ids:
                if judged[thread_id]["deleted"]:
                    deleted.append(thread_id)
                else:
                    kept += 1
                    logger.info(
                        "retention: kept thread %r: %s",
                        thread_id,
                        "; ".join(kept_reasons(judged[thread_id])),
                    )
            logger.info(
                "retention: deleted %d idle threads so far, kept %d with work in flight",
                len(deleted),
                kept,
            )

    @aretry_on_disconnect
    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per-channel writes and seed along the parent chain, in one statement."""
        if not channels:
            return {}
        channels = list(channels)
        thread_id, checkpoint_ns, checkpoint_id = _core.target(config)
        params: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        async with (
            self._source.connection("reading delta channel history") as conn,
            conn.cursor(binary=True) as cur,
        ):
            if checkpoint_id is None:
                await cur.execute(QUERIES["latest_checkpoint_id"], params)
                latest = await cur.fetchone()
                if latest is None:
                    return {ch: {"writes": []} for ch in channels}
                checkpoint_id = latest["checkpoint_id"]
            await cur.execute(
                QUERIES["delta_history"],
                {
                    **params,
                    "checkpoint_id": checkpoint_id,
                    "channels": channels,
                    "chain_only": False,
                },
            )
            rows = await cur.fetchall()
        return _core.assemble_delta_history(self.serde, channels, rows)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Channel versions in upstream's format, so both savers can share a thread."""
        return _core.next_version(current)
