# WARNING: generated from _aregistry.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""The run registry: create runs and control them; what workers use to take and finish them.

Generated from the async source; edit that file, not this one.

Runs live in `langgraph_durable_runs` beside the checkpoints. Every change to a thread's
runs takes that thread's row in `langgraph_durable_threads` first, so two creators with a
multitask strategy, a cancel and a worker's claim never see each other half done. A
worker holds a run under the thread's lease at a fencing token; `cancel`, `interrupt` and
`rollback` take the thread away by moving the token on, and the old worker's next write
is refused (invariant I5). Decisions are in `_model.py`.
"""

from __future__ import annotations

import builtins
import json
import logging
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from psycopg import Connection, errors
from psycopg.rows import DictRow
from typing_extensions import LiteralString

from langgraph_durable._db import (
    ConnectionSource,
    Heartbeat,
    Timeout,
    process_owner,
    source_of,
)
from langgraph_durable._fencing import Fence, with_fence
from langgraph_durable._ids import stored_id
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals import PendingApproval, pending_from_rows
from langgraph_durable.checkpoint import DurablePostgresSaver, delete_for_runs_txn
from langgraph_durable.errors import (
    RunConflictError,
    RunNotFoundError,
    ThreadBusyError,
)
from langgraph_durable.outbox import emit_txn
from langgraph_durable.runs._events import (
    Event,
    answered_event,
    checked_events,
    finish_events,
    sweep_events,
)
from langgraph_durable.runs._model import (
    ACTIVE,
    WAIT_FOR_PAUSE_MAX,
    GraphVersion,
    Outcome,
    Run,
    RunStatus,
    list_params,
    new_run_params,
    optional_seconds_of,
    outcome_params,
    run_id_of,
    run_of,
    seconds_of,
    stored,
    superseded_reason,
    taken_versions,
    version_of,
    workers_graphs,
    wrong_saver,
)
from langgraph_durable.serde import describing

__all__ = ["RunRegistry"]

PgConn = Connection[DictRow]


def _rows(conn: PgConn, query: LiteralString, params: dict[str, Any]) -> list[Any]:
    cur = conn.execute(query, params)
    return cur.fetchall() if cur.description else []


logger = logging.getLogger("langgraph_durable.runs")


class RunRegistry:
    """Runs of graphs in the database of an async saver.

    Args:
        saver: The saver whose database holds the runs (and whose serializer stores their
            inputs and outputs).
        events: Run and approval events to store in the outbox, each in the transaction of
            the change it announces (`RUN_EVENTS`: run.completed, run.failed,
            run.interrupted, run.blocked, run.stuck, run.timed_out, approval.requested with
            the question, approval.answered, effect.unknown); True for all. A relay
            publishes them (`langgraph-durable outbox relay`). Off by default: without a
            relay they would only pile up.
        lock_timeout: How long one registry statement may wait for a lock (seconds or a
            timedelta) before it fails with `LockTimeoutError`; None (default): the saver's.
        statement_timeout: How long one registry statement may run before it fails with
            `StatementTimeoutError`; None (default): the saver's.
    """

    def __init__(
        self,
        saver: DurablePostgresSaver,
        *,
        lock_timeout: Timeout = None,
        statement_timeout: Timeout = None,
        events: Collection[str] | bool = False,
    ) -> None:
        source = source_of(saver)
        if not isinstance(saver, DurablePostgresSaver) or source is None:
            raise wrong_saver(saver)
        if lock_timeout is not None or statement_timeout is not None:
            source = source.with_timeouts(
                lock_timeout=lock_timeout, statement_timeout=statement_timeout
            )
        self._source: ConnectionSource = source
        self.serde = saver.serde
        self.owner = process_owner()
        self.events = checked_events(events)

    # -- creating and controlling runs ------------------------------------------------------

    def create(
        self,
        graph: str | GraphVersion,
        input: Any,
        *,
        version: str | None = None,
        thread_id: str | None = None,
        config: RunnableConfig | None = None,
        metadata: dict[str, Any] | None = None,
        durability: str = "sync",
        multitask_strategy: str = "enqueue",
        max_attempts: int = 3,
        timeout: float | None = None,
        run_id: str | None = None,
    ) -> Run:
        """Queue a run of a graph on a thread (a new thread when none is given).

        Args:
            graph: The graph, or its name (then pass `version`).
            input: What `invoke` gets: the input, or a `Command`.
            version: The graph version the run is pinned to (default: `graph.version`).
            thread_id: The thread; a new one when omitted.
            config: `configurable` values for the graph (JSON values).
            metadata: Stored with the run and copied into its checkpoints' metadata.
            durability: "sync" (default), "async" or "exit".
            multitask_strategy: When the thread already has an active run: "reject"
                (`RunConflictError`), "enqueue" (run after it, the default), "interrupt"
                (stop it, keep its progress, run this one) or "rollback" (stop it, delete
                its progress, run this one).
            max_attempts: Executions before a run that keeps failing ends as `error`; one
                whose worker dies (killed, crashed) counts, one that ends waiting (an
                interrupt, a deferral) or is handed back does not. A run whose worker
                died in its last allowed attempt ends as `error` instead of being taken
                again (`WorkerLost`, unless an earlier attempt recorded an error: that
                one is kept).
            timeout: Seconds from now by which the run must have finished (else `timeout`).
            run_id: Your own id for the run (default: a new UUID).

        Raises:
            RunConflictError: The thread is busy and the strategy is "reject".
        """
        params = new_run_params(
            self.serde,
            graph,
            input,
            version=version,
            thread_id=thread_id or str(uuid.uuid4()),
            config=config,
            metadata=metadata,
            durability=durability,
            multitask_strategy=multitask_strategy,
            max_attempts=max_attempts,
            timeout=timeout,
            run_id=run_id or str(uuid.uuid4()),
        )
        try:
            with self._source.connection("creating a run") as conn, conn.transaction():
                thread = {"thread_id": params["thread_id"]}
                _rows(conn, QUERIES["thread_lease_row"], thread)
                active = _rows(conn, QUERIES["thread_active_runs"], thread)
                if active:
                    self._resolve_busy_thread(conn, params, [r["run_id"] for r in active])
                (row,) = _rows(conn, QUERIES["run_insert"], params)
                conn.execute(QUERIES["runs_wake"], {"run_id": params["run_id"]})
        except errors.UniqueViolation as exc:
            raise RunConflictError(
                f"A run with id {params['run_id']!r} exists already; nothing was created. "
                "Use a new run_id, or look the existing run up with get()."
            ) from exc
        return run_of(row, self.serde)

    def _resolve_busy_thread(
        self, conn: PgConn, params: dict[str, Any], active: builtins.list[str]
    ) -> None:
        """Apply the multitask strategy to a thread's active runs (inside the transaction)."""
        strategy = params["multitask_strategy"]
        thread = params["thread_id"]
        if strategy == "reject":
            raise RunConflictError(
                f"Thread {thread!r} already has an active run ({', '.join(active)}); nothing "
                "was created. Wait for it, or pass multitask_strategy='enqueue' (after it), "
                "'interrupt' (stop it, keep its progress) or 'rollback' (stop it, undo it)."
            )
        if strategy == "enqueue":
            return
        status = RunStatus.INTERRUPTED if strategy == "interrupt" else RunStatus.CANCELLED
        reason = superseded_reason(strategy, params["run_id"])
        _rows(
            conn,
            QUERIES["runs_set_status"],
            {"run_ids": active, "status": status.value, "reason": reason},
        )
        conn.execute(QUERIES["thread_fence_bump"], {"thread_id": thread})
        if strategy == "rollback":
            delete_for_runs_txn(conn, active)
            conn.execute(
                QUERIES["delete_rolled_back_effects"], {"thread_id": thread, "run_ids": active}
            )

    def _latest_checkpoint(self, conn: PgConn, run: Run) -> str | None:
        """The latest root checkpoint `run` wrote, or None."""
        found = _rows(
            conn,
            QUERIES["run_latest_checkpoint"],
            {"run_id": run.run_id, "thread_id": run.thread_id},
        )
        return found[0]["checkpoint_id"] if found else None

    def get(self, run_id: str) -> Run:
        """The run with this id.

        Raises:
            RunNotFoundError: No such run.
        """
        run_id = run_id_of(run_id)
        with self._source.connection("reading a run") as conn:
            found = _rows(conn, QUERIES["run_get"], {"run_id": run_id})
        if not found:
            raise RunNotFoundError(f"No run {run_id!r} in this database.")
        return run_of(found[0], self.serde)

    def list(
        self,
        *,
        status: RunStatus | str | None = None,
        thread_id: str | None = None,
        graph_name: str | None = None,
        limit: int = 100,
    ) -> builtins.list[Run]:
        """Runs, newest first, filtered by status, thread and graph."""
        params = list_params(status, thread_id, graph_name, limit)
        with self._source.connection("listing runs") as conn:
            return [run_of(r, self.serde) for r in _rows(conn, QUERIES["run_list"], params)]

    def question_holder(self, thread_id: str) -> Run | None:
        """The run a thread's waiting question belongs to: one of the thread's runs on its
        way, else the interrupted run that asked it (whatever newer runs came and went);
        None for a thread no run of the registry holds. Such a question is answered
        through `resume` of that run, not by running the graph elsewhere."""
        with self._source.connection("finding the run a question belongs to") as conn:
            found = _rows(conn, QUERIES["thread_question_run"], {"thread_id": thread_id})
        return run_of(found[0], self.serde) if found else None

    def cancel(self, run_id: str) -> Run:
        """Cancel a run that has not finished; a running one loses its thread at once.

        A run that has finished (or is waiting at an interrupt) keeps its outcome:
        `RunConflictError`.
        """
        thread_id = (self.get(run_id)).thread_id
        with self._source.connection("cancelling a run") as conn, conn.transaction():
            # The thread's row lock orders this with claims and finishes; read it again.
            _rows(conn, QUERIES["thread_lease_row"], {"thread_id": thread_id})
            run = run_of((_rows(conn, QUERIES["run_get"], {"run_id": run_id}))[0], self.serde)
            if run.status not in ACTIVE:
                raise RunConflictError(
                    f"Run {run_id!r} is {run.status.value}; only a pending, running, deferred "
                    "or blocked run can be cancelled. Nothing was changed."
                )
            rows = _rows(
                conn,
                QUERIES["runs_set_status"],
                {
                    "run_ids": [run_id],
                    "status": RunStatus.CANCELLED.value,
                    "reason": "cancelled",
                },
            )
            if run.status is RunStatus.RUNNING:
                conn.execute(QUERIES["thread_fence_bump"], {"thread_id": run.thread_id})
            conn.execute(QUERIES["runs_wake"], {"run_id": run_id})
        return run_of(rows[0], self.serde)

    def _requeue(
        self,
        run_id: str,
        from_statuses: Sequence[RunStatus],
        *,
        input: Any = None,
        give_input: bool = False,
        graph_version: str | None = None,
        reset_attempts: bool = False,
        waiting_answer: bool = False,
        renew_deadline: bool = False,
        question: str | None = None,
        thread_not_gone_on: bool = False,
    ) -> Run:
        run = self.get(run_id)
        with self._source.connection("queueing a run again") as conn, conn.transaction():
            _rows(conn, QUERIES["thread_lease_row"], {"thread_id": run.thread_id})
            # Read again under the thread's lock: read before it, a run seen `pending` or
            # `running` may since have stopped at its next question, and an answer meant
            # for the one before would be queued for that one.
            (row,) = _rows(conn, QUERIES["run_get"], {"run_id": run_id})
            run = run_of(row, self.serde)
            encoded = stored(self.serde, input) if give_input else (None, None)
            latest = self._latest_checkpoint(conn, run)
            if waiting_answer:
                self._check_waits_for_answer(conn, run, latest, question)
            if thread_not_gone_on and run.status in from_statuses:
                self._check_thread_not_gone_on(conn, run)
            rows = _rows(
                conn,
                QUERIES["run_requeue"],
                {
                    "run_id": run_id,
                    "from_statuses": [s.value for s in from_statuses],
                    "input_type": encoded[0],
                    "input": encoded[1],
                    "input_after": latest,
                    "graph_version": graph_version,
                    "reset_attempts": reset_attempts,
                    "renew_deadline": renew_deadline,
                },
            )
            if rows and waiting_answer and self.events:
                self._emit(conn, answered_event(run_of(rows[0]), input, self.events))
            if not rows:
                allowed = ", ".join(s.value for s in from_statuses)
                raise RunConflictError(
                    f"Run {run_id!r} is {run.status.value}; only a run that is {allowed} can "
                    "go back to the queue this way."
                )
            conn.execute(QUERIES["runs_wake"], {"run_id": run_id})
        return run_of(rows[0], self.serde)

    def _check_thread_not_gone_on(self, conn: PgConn, run: Run) -> None:
        """Refuse to retry a run whose thread went on with a newer run: it would go on from
        that run's checkpoints, and report the newer run's output as its own. Refuse one
        rolled back too: its checkpoints and its effects' journal rows are gone, so it
        would start over and act again."""
        if (run.status_reason or "").startswith(superseded_reason("rollback", "")):
            raise RunConflictError(
                f"Run {run.run_id!r} cannot be retried: it was rolled back "
                f"({run.status_reason}), its checkpoints and its effects' journal rows "
                "deleted, so it would start over and act again. Nothing was changed; create "
                "a new run on the thread instead."
            )
        newer = _rows(
            conn,
            QUERIES["run_newer_started"],
            {"thread_id": run.thread_id, "created_at": run.created_at},
        )
        if newer:
            raise RunConflictError(
                f"Run {run.run_id!r} cannot be retried: its thread {run.thread_id!r} went on "
                f"with run {newer[0]['run_id']!r} since, and it would go on from that run's "
                "checkpoints. Nothing was changed; create a new run on the thread instead."
            )

    def _asked(
        self, conn: PgConn, run: Run, latest: str | None, *, limit: int = 1
    ) -> builtins.list[Any] | None:
        """The interrupt rows of the questions `run` waits on, or None when it waits for no
        answer: its thread is not stopped at an interrupt() in the latest checkpoint it
        wrote (`latest`: a newer run went on, or stopped it before it asked)."""
        asked = _rows(
            conn, QUERIES["pending_interrupts_thread"], {"thread_id": run.thread_id, "limit": limit}
        )
        if latest is None or not asked or asked[0]["checkpoint_id"] != latest:
            return None
        return asked

    def waits_for_answer(self, run_id: str) -> bool:
        """Whether the run is interrupted at a question someone can still answer (`resume`
        takes it): its thread is stopped at an interrupt() in the latest checkpoint the run
        wrote. False for any other status, and for an interrupted run whose thread went on
        without it, or that a newer run stopped before it asked."""
        run = self.get(run_id)
        if run.status is not RunStatus.INTERRUPTED:
            return False
        with self._source.connection("reading a run's question") as conn:
            latest = self._latest_checkpoint(conn, run)
            return self._asked(conn, run, latest) is not None

    def _check_waits_for_answer(
        self, conn: PgConn, run: Run, latest: str | None, question: str | None
    ) -> None:
        """Refuse to resume a run that waits for no answer: one stopped by a newer run (the
        "interrupt" strategy) before or after it asked, or already answered. Its input would
        otherwise be sent to a thread that is not waiting, and the run would "succeed"
        without its graph having run. With `question` (an interrupt id), refuse unless the
        run still waits on that question: an answer read off a page could otherwise reach
        the next question the run asked once someone else's answer got there first."""
        if run.status is not RunStatus.INTERRUPTED:
            return  # the status check of `run_requeue` names the problem
        asked = self._asked(conn, run, latest, limit=1 if question is None else 1000)
        if asked is None:
            reason = f" ({run.status_reason})" if run.status_reason else ""
            raise RunConflictError(
                f"Run {run.run_id!r} is interrupted{reason} but does not wait for an answer: "
                "its thread is not stopped at an interrupt() of this run. Nothing was queued; "
                "create a new run on the thread instead."
            )
        if question is not None:
            # Only the interrupts' ids are read: the describing twin needs none of the
            # application's types, whichever process answers.
            waiting = pending_from_rows(describing(self.serde), asked, only_approvals=False)
            if question not in {p.interrupt_id for p in waiting}:
                raise RunConflictError(
                    f"Run {run.run_id!r} no longer waits on question {question!r}: it was "
                    "answered, or asked again, meanwhile. Nothing was queued; list the "
                    "thread's questions again and answer the one that waits now."
                )

    def retry(self, run_id: str) -> Run:
        """Queue again a run that ended (error, timeout, cancelled) or is blocked; it goes
        on from its last checkpoint, with its attempts counted afresh and, if it was created
        with a timeout, that whole timeout again from now."""
        statuses = (RunStatus.ERROR, RunStatus.TIMEOUT, RunStatus.CANCELLED, RunStatus.BLOCKED)
        return self._requeue(
            run_id, statuses, reset_attempts=True, renew_deadline=True, thread_not_gone_on=True
        )

    def resume(self, run_id: str, command: Any, *, question: str | None = None) -> Run:
        """Answer an interrupted run: it is queued with `command` (a `Command(resume=...)`),
        with its whole timeout again from now if it was created with one (the time it
        waited for a person does not count).

        Args:
            question: The interrupt id of the question answered (a
                `PendingApproval.interrupt_id`): the run is queued only while it still
                waits on it. Give it whenever the answer was read off a list of questions.

        Raises:
            RunConflictError: The run is not interrupted, waits for no answer (a newer
                run stopped it: create a new run instead), or no longer on `question`.
        """
        return self._requeue(
            run_id,
            (RunStatus.INTERRUPTED,),
            input=command,
            give_input=True,
            waiting_answer=True,
            renew_deadline=True,
            question=question,
        )

    def migrate(self, run_id: str, version: str) -> Run:
        """Pin a pending or blocked run to another graph version (its state must fit it)."""
        version = version_of(version)
        statuses = (RunStatus.PENDING, RunStatus.BLOCKED, RunStatus.DEFERRED)
        return self._requeue(run_id, statuses, graph_version=version)

    def wait_for(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Wait until the run has finished (or is waiting for a person); the run then.

        Looks at the run after a growing pause (20 ms, doubling up to 250 ms), borrowing a
        connection for each look. Not LISTEN/NOTIFY: Postgres wakes every session that
        listens in the database for each NOTIFY, whatever its channel, and each wake costs
        that session a transaction. A NOTIFY per finished run made every worker pay one
        transaction per run (+16 commits per run with 16 workers, measured); a waiter's
        look is one primary-key read. Returns the run as it is when `timeout` seconds have
        passed, finished or not.
        """
        run_id = run_id_of(run_id)
        if timeout is not None and timeout == 0:
            return self.get(run_id)
        timeout = optional_seconds_of(timeout, "timeout")
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.02
        while True:
            run = self.get(run_id)
            if run.finished or run.status is RunStatus.BLOCKED:
                return run
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return run
            time.sleep(pause if left is None else min(pause, left))
            pause = min(WAIT_FOR_PAUSE_MAX, pause * 2)

    def output_of(self, run: Run) -> Any:
        """What the run's graph returned (None until it has finished)."""
        if run.stored_output is None:
            return None
        return self.serde.loads_typed(run.stored_output)

    def input_of(self, run: Run) -> Any:
        """What the run sends when it starts: its input, or the `Command` that resumes it."""
        if run.stored_input is None:
            return None
        return self.serde.loads_typed(run.stored_input)

    def stuck(self, *, limit: int = 100) -> builtins.list[Run]:
        """Runs flagged as stuck (running without progress, or waiting too long)."""
        limit = list_params(None, None, None, limit)["limit"]
        with self._source.connection("listing stuck runs") as conn:
            rows = _rows(conn, QUERIES["runs_stuck"], {"limit": limit})
        return [run_of(r, self.serde) for r in rows]

    def workers(self, *, live_seconds: float = 90.0) -> builtins.list[dict[str, Any]]:
        """The workers that announced themselves, with the graph versions they take."""
        live_seconds = seconds_of(live_seconds, "live_seconds")
        with self._source.connection("listing workers") as conn:
            return _rows(conn, QUERIES["workers_list"], {"live_seconds": live_seconds})

    @contextmanager
    def exclusive(self, thread_id: str, *, lease_seconds: float = 30.0) -> Iterator[RunnableConfig]:
        """Hold a thread's lease for plain `graph.invoke` calls; yields the config to use.

        Two processes resuming one thread at once cannot both run it: the second gets
        `ThreadBusyError`, and a holder whose lease was taken over gets `FencedOutError` at
        its next write. The lease is renewed every third of `lease_seconds` while the block
        runs (a long node keeps it), and runs out `lease_seconds` after a holder dies.
        """
        thread_id = stored_id(thread_id, "thread_id")
        lease_seconds = seconds_of(lease_seconds, "lease_seconds")
        with self._source.connection("taking a thread's lease (exclusive)") as conn:
            found = _rows(
                conn,
                QUERIES["thread_take_lease"],
                {"thread_id": thread_id, "owner": self.owner, "lease_seconds": lease_seconds},
            )
        if not found:
            raise ThreadBusyError(
                f"Thread {thread_id!r} is held by another process (a run's worker or another "
                "exclusive caller); try again when it is done."
            )
        token = int(found[0]["fencing_token"])

        def beat() -> None:
            with self._source.connection("renewing a thread's lease (exclusive)") as conn:
                kept = _rows(
                    conn,
                    QUERIES["thread_extend_lease"],
                    {"thread_id": thread_id, "fence_token": token, "lease_seconds": lease_seconds},
                )
            if not kept:
                logger.warning(
                    "thread %s: its lease was taken over; the holder's writes are refused",
                    thread_id,
                )

        try:
            with Heartbeat(beat, lease_seconds / 3, f"thread {thread_id}").running():
                yield with_fence({"configurable": {"thread_id": thread_id}}, Fence(token))
        finally:
            with self._source.connection("releasing a thread's lease (exclusive)") as conn:
                released = _rows(
                    conn,
                    QUERIES["thread_release_lease"],
                    {"thread_id": thread_id, "fence_token": token},
                )
                if released and released[0]["thread_has_next"]:
                    # A run of the thread waited for this lease: its workers may take it now.
                    conn.execute(QUERIES["runs_wake"], {"run_id": thread_id})

    # -- what workers call ------------------------------------------------------------------

    def claim(
        self, graphs: Sequence[GraphVersion], *, owner: str, lease_seconds: float
    ) -> Run | None:
        """Take the oldest run these graphs can run, with its thread's lease; or None."""
        params = {
            **taken_versions(graphs),
            "owner": owner,
            "lease_seconds": lease_seconds,
        }
        with self._source.connection("claiming a run") as conn:
            rows = _rows(conn, QUERIES["run_claim"], params)
        return run_of(rows[0], self.serde) if rows else None

    def latest_checkpoint(self, run: Run) -> str | None:
        """The latest root checkpoint `run` wrote, or None (see `sends_input`)."""
        with self._source.connection("reading a run's latest checkpoint") as conn:
            return self._latest_checkpoint(conn, run)

    def heartbeat(self, run: Run, lease_seconds: float, *, worker_id: str | None = None) -> bool:
        """Move the run's and its thread's lease on (and the worker's own heartbeat);
        False once the run is no longer ours."""
        params = {
            "run_id": run.run_id,
            "thread_id": run.thread_id,
            "fence_token": run.fencing_token,
            "lease_seconds": lease_seconds,
        }
        with self._source.connection("extending a run's lease") as conn:
            if worker_id is not None:
                conn.execute(QUERIES["worker_alive"], {"worker_id": worker_id})
            return bool(_rows(conn, QUERIES["run_heartbeat"], params))

    def mark_migrated(self, run: Run, marker: str) -> bool:
        """Mark the thread's latest root checkpoint with a migration's `marker`, behind
        the run's fence (`run_mark_migrated`); False if it has no checkpoint yet or the run
        is no longer this worker's."""
        params = {
            "run_id": run.run_id,
            "thread_id": run.thread_id,
            "fence_token": run.fencing_token,
            "marker": marker,
        }
        with self._source.connection("marking a run's migration done") as conn:
            return bool(_rows(conn, QUERIES["run_mark_migrated"], params))

    def migrated_already(self, run: Run, marker: str) -> bool:
        """Whether the thread's latest root checkpoint carries `marker`."""
        params = {"thread_id": run.thread_id, "marker": marker}
        with self._source.connection("reading whether a run was migrated") as conn:
            found = _rows(conn, QUERIES["run_migrated_already"], params)
        return bool(found and found[0]["migrated"])

    def set_version(self, run: Run, version: str) -> bool:
        params = {"run_id": run.run_id, "fence_token": run.fencing_token, "graph_version": version}
        with self._source.connection("pinning a run's version") as conn:
            return bool(_rows(conn, QUERIES["run_set_version"], params))

    def finish(self, run: Run, outcome: Outcome) -> bool:
        """Record how an execution ended, if the run is still this worker's; wakes the
        workers only when there is a run for them now."""
        params = outcome_params(self.serde, run, outcome)
        with self._source.connection("finishing a run") as conn, conn.transaction():
            found = _rows(conn, QUERIES["run_finish"], params)
            if found and self.events:
                self._emit(conn, self._finish_events(conn, run, outcome))
            if found and (found[0]["thread_has_next"] or outcome.status is RunStatus.PENDING):
                # The thread's next run may go, or this one is back in the queue.
                conn.execute(QUERIES["runs_wake"], {"run_id": run.run_id})
        return bool(found)

    def sweep(
        self, graphs: Sequence[GraphVersion], *, worker_id: str, live_seconds: float
    ) -> dict[str, builtins.list[dict[str, Any]]]:
        """A worker's housekeeping: announce itself (live for `live_seconds` after this
        heartbeat), time out late runs, end runs whose worker died in their last allowed
        attempt, flag stuck ones, and block runs of versions no live worker takes. Returns
        what changed."""
        names = [g.name for g in graphs]
        running = [g.stuck_after.total_seconds() for g in graphs]
        waiting = [
            None if g.waiting_stuck_after is None else g.waiting_stuck_after.total_seconds()
            for g in graphs
        ]
        with self._source.connection("sweeping runs") as conn, conn.transaction():
            conn.execute(QUERIES["sweep_without_jit"])
            conn.execute(
                QUERIES["worker_heartbeat"],
                {
                    "worker_id": worker_id,
                    "owner": self.owner,
                    "graphs": json.dumps(workers_graphs(graphs, live_seconds)),
                },
            )
            timed_out = _rows(conn, QUERIES["runs_time_out"], {})
            crash_loops = _rows(conn, QUERIES["runs_end_crash_loops"], {})
            stuck = _rows(
                conn,
                QUERIES["runs_flag_stuck"],
                {"names": names, "running_seconds": running, "waiting_seconds": waiting},
            )
            blocked = _rows(conn, QUERIES["runs_block_unrunnable"], {"live_seconds": live_seconds})
            if self.events:
                changed = {
                    "timed_out": timed_out,
                    "crash_loops": crash_loops,
                    "stuck": stuck,
                    "blocked": blocked,
                }
                self._emit(conn, sweep_events(changed, self.events))
        return {
            "timed_out": timed_out,
            "crash_loops": crash_loops,
            "stuck": stuck,
            "blocked": blocked,
        }

    def _finish_events(self, conn: PgConn, run: Run, outcome: Outcome) -> builtins.list[Event]:
        """The events of a finish, with the approvals the run stopped to ask for."""
        asked: builtins.list[PendingApproval] = []
        if outcome.status is RunStatus.INTERRUPTED and "approval.requested" in self.events:
            rows = _rows(
                conn,
                QUERIES["pending_interrupts_thread"],
                {"thread_id": run.thread_id, "limit": 100},
            )
            asked = pending_from_rows(self.serde, rows, only_approvals=True)
        return finish_events(run, outcome, asked, self.events)

    def _emit(self, conn: PgConn, events: Sequence[Event]) -> None:
        """Store run events in the outbox, in the transaction of the change they announce."""
        for kind, payload, event_id in events:
            emit_txn(conn, kind, payload, key=payload.get("thread_id") or "", event_id=event_id)

    def forget_worker(self, worker_id: str) -> None:
        with self._source.connection("signing a worker off") as conn:
            conn.execute(QUERIES["worker_gone"], {"worker_id": worker_id})

    @contextmanager
    def listening(self) -> Iterator[PgConn | None]:
        """A connection that hears new runs (None when the saver has a single connection,
        or a pool of one, which cannot be lent for listening: workers then look every
        `idle_wait`). Listening on a pool's only connection left none to take a run with:
        every claim waited for the pool, and the worker stopped, saying the database could
        not be reached."""
        if not self._source.pooled or self._source.capacity < 2:
            yield None
            return
        with self._source.connection("listening for new runs") as conn:
            conn.execute(QUERIES["runs_listen"])
            if not conn.autocommit:
                # LISTEN takes effect at commit: a pool's connection without autocommit
                # would otherwise hear nothing, and new runs wait for `idle_wait`.
                conn.commit()
            try:
                yield conn
            finally:
                # A connection the server dropped (a restart) is discarded by the pool;
                # UNLISTEN on it would only hide the error that ended the listening.
                if not conn.broken and not conn.closed:
                    if not conn.autocommit:
                        conn.rollback()  # whatever an error left open: not UNLISTEN's
                    conn.execute(QUERIES["runs_unlisten"])
                    if not conn.autocommit:
                        # Committed here: the rollback that follows an error would undo
                        # it, and the connection go back to the pool still listening.
                        conn.commit()

    def seconds_to_next_due(self, graphs: Sequence[GraphVersion]) -> float | None:
        """Seconds until a run these graphs can take (the versions `claim` takes) becomes
        takeable by time alone, or None."""
        with self._source.connection("reading when the next run is due") as conn:
            rows = _rows(conn, QUERIES["runs_next_due"], taken_versions(graphs))
        seconds = rows[0]["seconds"] if rows else None
        return None if seconds is None else max(0.0, float(seconds))

    def wait_wakeup(self, conn: PgConn | None, seconds: float) -> None:
        """Wait until a run may have become takeable, or `seconds` have passed."""
        if conn is None:
            time.sleep(seconds)
            return
        for _ in conn.notifies(timeout=seconds, stop_after=1):
            pass
