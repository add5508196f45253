# WARNING: generated from _aworker.py by tools/async_to_sync.py. DO NOT EDIT.
# Edit the async source and run `python tools/async_to_sync.py`.
"""Workers: take runs, run them under a fenced lease, recover the runs of dead workers.

Generated from the async source; edit that file, not this one.

A worker knows graphs by name and version (`GraphVersion`). It takes the oldest run it can
run with `FOR UPDATE SKIP LOCKED`, together with the thread's lease at a new fencing token;
a run whose worker died is taken the same way once its lease has run out. It resumes each
run the right way for its state (`sends_input`): its input (or the `Command` that answers
an interrupt) until LangGraph has taken it in, `None` afterwards. While the graph runs, a
heartbeat keeps the lease; every checkpoint it writes carries the fencing token, so a
worker that lost the run cannot advance the thread (invariant I5). How the run ends is
decided by `outcome_of`. Between runs the worker waits on LISTEN/NOTIFY. It keeps house
every `sweep_every` seconds, between runs and while it runs one (a second heartbeat, so a
fleet whose every worker is busy still enforces deadlines): it times out late runs, flags
stuck ones and blocks runs no live worker's version takes. A run its own worker's sweep
times out is fenced out like one another worker's sweep timed out: its next write is
refused, and it stays `timeout`.

A database outage (a server restart, the network) does not end the worker: it looks again
with a growing pause, listens again once the server answers, and records the outcome of
the run it was running then (conditional on its fencing token, so never over a worker
that took the run over meanwhile). Only an outage longer than `database_timeout` ends
`run_forever`, with `DatabaseUnreachableError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphDrained
from langgraph.runtime import RunControl

from langgraph_durable import _crashpoints, _telemetry
from langgraph_durable._db import Heartbeat
from langgraph_durable._fencing import Fence, with_fence
from langgraph_durable._wakeups import collecting_wakeups, earliest
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.durability import Durability
from langgraph_durable.errors import DatabaseUnreachableError, FencedOutError
from langgraph_durable.runs._model import (
    LEASE_LOST,
    GraphVersion,
    Next,
    Outage,
    Outcome,
    Run,
    check_sync_worker_graphs,
    first_line,
    for_migration_hook,
    is_outage,
    log_ids,
    migration_hook_result,
    migration_marker,
    optional_seconds_of,
    outcome_label,
    outcome_of,
    passed_on,
    run_span_attributes,
    seconds_of,
    sends_input,
    stopped_from_outside,
    unstored_outcome,
    waited_out,
    worker_name,
)
from langgraph_durable.runs._registry import RunRegistry
from langgraph_durable.runs._signals import Termination, WorkerTerminated

__all__ = ["Worker"]

logger = logging.getLogger("langgraph_durable.runs")

T = TypeVar("T")


class Worker:
    """Runs the runs of some graphs, one at a time, until stopped.

    Args:
        saver: The saver the graphs are compiled with (its database holds the runs).
        graphs: The graphs this worker runs, each with its name and version.
        lease_seconds: How long a run is this worker's without a heartbeat; a run whose
            worker died is taken over by another this long after the last beat.
        idle_wait: Longest wait between looks at the queue. New runs wake the worker at once
            (LISTEN/NOTIFY); a lease running out or a retry time coming due wakes it then.
        name: This worker's id in `langgraph_durable_workers` (default: host:pid and a
            random suffix).
        database_timeout: How long the worker keeps trying while the database cannot be
            reached before `run_forever` gives up with `DatabaseUnreachableError` (None:
            never). Shorter outages (a restart) cost a pause, never a run.
        events: Run and approval events this worker stores in the outbox with the changes
            they announce (`RUN_EVENTS`; True for all): see `RunRegistry`.
    """

    def __init__(
        self,
        saver: DurablePostgresSaver,
        graphs: Sequence[GraphVersion],
        *,
        lease_seconds: float = 30.0,
        idle_wait: float = 5.0,
        name: str | None = None,
        database_timeout: float | None = 300.0,
        events: Collection[str] | bool = False,
    ) -> None:
        self.graphs = check_sync_worker_graphs(graphs, saver)
        self.registry = RunRegistry(saver, events=events)
        self.lease_seconds = seconds_of(lease_seconds, "lease_seconds")
        self.idle_wait = seconds_of(idle_wait, "idle_wait")
        self.worker_id = worker_name(name)
        self.database_timeout = optional_seconds_of(database_timeout, "database_timeout")
        self._stopping = False
        self._swept_at = -float("inf")  # the first look sweeps
        self._termination = Termination(self.stop)

    def stop(self) -> None:
        """Take no new run; the one running finishes (a killed worker's run is taken over).

        SIGTERM does more under `run_forever`: it hands the running run back at once."""
        self._stopping = True

    def run_until_idle(self, *, max_runs: int | None = None) -> list[Run]:
        """Run every run that can be taken now, one after another; the runs as they ended.

        Raises:
            DatabaseUnreachableError: The database could not be reached (`run_forever`
                waits such outages out instead).
        """
        try:
            return self._run_available(max_runs, sweep_first=True, keep=True)
        except Exception as exc:
            if not is_outage(exc):
                raise
            raise DatabaseUnreachableError(
                f"Worker {self.worker_id} lost the database ({first_line(exc)}). Runs it "
                "held are taken over when their leases run out; call it again once the "
                "server is back, or use run_forever, which waits outages out."
            ) from exc

    @property
    def sweep_every(self) -> float:
        """Seconds between housekeeping sweeps, between runs and while one runs (they are
        also the worker's heartbeat when it runs no run): a third of the lease, and at
        least every `idle_wait`."""
        return min(self.lease_seconds / 3, self.idle_wait)

    def _run_available(self, max_runs: int | None, *, sweep_first: bool, keep: bool) -> list[Run]:
        """Take and run runs until none is due (or `max_runs`); the finished runs if `keep`.

        `run_forever` keeps none: a queue that never empties would otherwise keep every
        run it finished, with its stored input and output, for as long as the backlog
        lasts."""
        done: list[Run] = []
        finished = 0
        while not self._stopping and (max_runs is None or finished < max_runs):
            if sweep_first or time.monotonic() - self._swept_at >= self.sweep_every:
                # Not on every wake-up: each create and finish wakes every worker, and a
                # sweep per wake-up made the registry's cost grow with the fleet. Between
                # short runs too, so a long queue does not silence the worker's heartbeat.
                sweep_first = False
                self._sweep()
            run = self.registry.claim(
                self.graphs, owner=self.worker_id, lease_seconds=self.lease_seconds
            )
            if run is None:
                break
            if keep:
                done.append(self.execute(run))
            else:
                self.execute(run)
            finished += 1
        return done

    def run_forever(self, *, handle_sigterm: bool = True) -> None:
        """Take and run runs until `stop()`; wait on notifications in between.

        Args:
            handle_sigterm: Make SIGTERM (a deploy, `docker stop`, Kubernetes) stop the
                worker and hand the running run back to the queue at once, its attempt
                given back, and then return; Python's default ends the process, leaving
                the run running until its lease runs out, an attempt used up. Only in the
                main thread, and only while SIGTERM has Python's default handler (one of
                your own is left alone); the previous handler is back on return.

        Raises:
            DatabaseUnreachableError: The database could not be reached for
                `database_timeout` seconds.
        """
        with self._termination.installed(handle_sigterm):
            self._run_until_stopped()

    def _run_until_stopped(self) -> None:
        outage = Outage(self.database_timeout)
        try:
            while not self._stopping:
                try:
                    with self.registry.listening() as listener:
                        while not self._stopping:
                            self._run_available(None, sweep_first=False, keep=False)
                            self._recovered(outage)
                            if self._stopping:
                                break
                            due = self.registry.seconds_to_next_due(self.graphs)
                            next_sweep = self._swept_at + self.sweep_every - time.monotonic()
                            wait = min(self.idle_wait, max(0.0, next_sweep) + 0.01)
                            wait = wait if due is None else min(wait, due + 0.01)
                            self.registry.wait_wakeup(listener, wait)
                except Exception as exc:
                    if not waited_out(exc):
                        raise
                    self._wait_outage(outage, exc, "taking runs")
        finally:
            try:
                self.registry.forget_worker(self.worker_id)
            except Exception as exc:
                if not is_outage(exc):
                    raise
                logger.warning(
                    "worker %s: could not sign off (%s); it drops out of the list of live "
                    "workers when its heartbeat gets old",
                    self.worker_id,
                    first_line(exc),
                )

    def _recovered(self, outage: Outage) -> None:
        lasted = outage.over()
        if lasted is not None:
            logger.warning(
                "worker %s: the database answers again, after %.1f s", self.worker_id, lasted
            )

    def _wait_outage(self, outage: Outage, exc: BaseException, doing: str) -> None:
        """Pause before trying again after a failure to reach the database, or give up."""
        delay = outage.failed()
        if delay is None:
            raise DatabaseUnreachableError(
                f"Worker {self.worker_id} could not reach the database (or get a statement "
                f"through) for {self.database_timeout:g} s while {doing} (last error: "
                f"{first_line(exc)}); it "
                "stops. Runs it held are taken over by other workers when their leases run "
                "out. Start it again once the server is back, or give it a longer "
                "database_timeout."
            ) from exc
        if outage.failures == 1:
            logger.warning(
                "worker %s: the database does not answer while %s (%s); trying again "
                "with a growing pause",
                self.worker_id,
                doing,
                first_line(exc),
            )
        time.sleep(delay)

    def _through_outage(self, operation: Callable[[], T], doing: str) -> T:
        """`operation` (one idempotent or fenced statement), tried until the database
        answers or `database_timeout` has passed."""
        outage = Outage(self.database_timeout)
        while True:
            try:
                result = operation()
            except Exception as exc:
                if not waited_out(exc):
                    raise
                self._wait_outage(outage, exc, doing)
                continue
            self._recovered(outage)
            return result

    def execute(self, run: Run) -> Run:
        """Run a claimed run to its next status; the run as it is afterwards."""
        _crashpoints.reached("run:after_claim")
        graph = self._graph_for(run)
        config = self._config_for(run)
        # Under durability "async" or "exit" LangGraph runs the next steps before a
        # fenced write fails: a run that lost its lease (cancelled, timed out, taken
        # over) went on computing to its end, its effects refused one by one. Drained,
        # it stops once the step under way ends.
        control = RunControl()
        lease_lost = False

        def beat() -> None:
            # A lease once lost stays lost (the fencing token moved on): said once, and not
            # asked again at every beat while the step under way ends.
            nonlocal lease_lost
            if lease_lost:
                return
            if not self.registry.heartbeat(run, self.lease_seconds, worker_id=self.worker_id):
                lease_lost = True
                logger.warning(
                    "run %s: the lease was taken over; its writes are refused from now on, "
                    "and it stops after the step under way",
                    run.run_id,
                    extra=log_ids(run),
                )
                control.request_drain(LEASE_LOST)

        if run.recovered_after is not None:
            _telemetry.measure(
                "langgraph_durable.run.recovery",
                run.recovered_after,
                {"graph": run.graph_name},
            )
        with _telemetry.span("langgraph_durable.run", run_span_attributes(run)):
            outcome = self._execute_traced(run, graph, config, beat, control)
        finished = self._finish(run, outcome)
        stop = passed_on(outcome)
        if stop is not None:
            raise stop
        return finished

    def _execute_traced(
        self,
        run: Run,
        graph: GraphVersion,
        config: RunnableConfig,
        beat: Any,
        control: RunControl,
    ) -> Outcome:
        heartbeat = Heartbeat(beat, self.lease_seconds / 3, run.run_id)
        # The sweep goes on while the run runs: with every worker busy, no one else would
        # time runs out or flag stuck ones (this one included).
        housekeeping = Heartbeat(self._sweep_beside, self.sweep_every, run.run_id)
        with heartbeat.running(), housekeeping.running():
            wakeups: list[datetime] = []
            try:
                with collecting_wakeups() as wakeups:
                    output, interrupted = self._termination.interruptible(
                        lambda: self._run_graph(run, graph, config, control)
                    )
                outcome = outcome_of(run, output=output, interrupted=interrupted)
            except Exception as exc:
                outcome = outcome_of(run, error=exc, wake_at=earliest(wakeups))
            except WorkerTerminated:
                # SIGTERM under run_forever: back to the queue, attempt given back, and
                # recorded like any outcome (riding out an outage); run_forever returns.
                logger.warning(
                    "run %s: handed back, its worker got SIGTERM", run.run_id, extra=log_ids(run)
                )
                outcome = Outcome(Next.FINISH).handed_back()
            except BaseException as exc:
                if not stopped_from_outside(exc, stopping=self._stopping):
                    # The run stopped itself (a node's sys.exit(), a stray CancelledError):
                    # a failed attempt, so a run that keeps doing it ends as error.
                    outcome = outcome_of(run, error=exc)
                else:
                    # Stopped (stop(), Ctrl-C, cancellation): hand the run back to the queue.
                    self.registry.finish(run, outcome_of(run, error=exc).handed_back())
                    raise
        status = outcome_label(outcome)
        _telemetry.annotate(
            {
                "langgraph_durable.run.status": status,
                "langgraph_durable.error_type": outcome.error_type,
            }
        )
        _telemetry.count(
            "langgraph_durable.runs.finished",
            1,
            {"graph": run.graph_name, "status": status},
            "Executions of runs by how they ended",
        )
        return outcome

    def _run_graph(
        self, run: Run, graph: GraphVersion, config: RunnableConfig, control: RunControl
    ) -> tuple[Any, bool]:
        """Run the run's graph from where it got to: its output, and whether it stopped
        at an interrupt.

        Everything here ends the attempt when it fails, like an error of the run itself:
        a migration hook that raises, or a stored input that cannot be loaded, would
        otherwise escape and stop the worker (and every worker after it).
        """
        if run.graph_version not in graph.compatible_with | {graph.version}:
            self._migrate(graph, run, config)
        latest = self.registry.latest_checkpoint(run)
        payload = self.registry.input_of(run) if sends_input(run, latest) else None
        mode = cast(Durability, run.durability)
        try:
            output = graph.graph.invoke(payload, config, durability=mode, control=control)
        except GraphDrained as exc:
            if exc.reason != LEASE_LOST:
                raise
            raise FencedOutError(
                f"Run {run.run_id} lost its lease while it ran (cancelled, timed out or taken "
                "over); it stopped after the step under way."
            ) from exc
        state = graph.graph.get_state(config)
        return output, bool(state.interrupts)

    def _finish(self, run: Run, outcome: Outcome) -> Run:
        """Record how the execution ended (riding out an outage); the run afterwards."""
        _crashpoints.reached("run:before_finish")
        doing = f"recording how run {run.run_id} ended"
        if outcome.next is Next.LOST:
            logger.warning(
                "run %s: another worker took it over; leaving it", run.run_id, extra=log_ids(run)
            )
        elif not self._store_outcome(run, outcome, doing):
            # Conditional on the fencing token: a retry after an outage never writes over
            # a worker that took the run over meanwhile.
            logger.warning(
                "run %s: taken over before it could finish", run.run_id, extra=log_ids(run)
            )
        elif outcome.error is not None:
            logger.info(
                "run %s: %s (%s)", run.run_id, outcome.status, outcome.error, extra=log_ids(run)
            )
        return self._through_outage(lambda: self.registry.get(run.run_id), doing)

    def _store_outcome(self, run: Run, outcome: Outcome, doing: str) -> bool:
        """Store `outcome` (riding out an outage); False if the run is no longer ours.

        Any other failure records the run as `error`, saying why (`unstored_outcome`),
        instead of escaping: the run would stay running and stop every worker that took
        it, one after another.
        """
        try:
            return self._through_outage(lambda: self.registry.finish(run, outcome), doing)
        except Exception as exc:
            if is_outage(exc):
                raise  # the database stayed away longer than database_timeout
            fallback = unstored_outcome(outcome, exc)
            logger.error(
                "run %s: %s",
                run.run_id,
                fallback.message,
                exc_info=exc,
                extra=log_ids(run),
            )
            return self._through_outage(lambda: self.registry.finish(run, fallback), doing)

    def _graph_for(self, run: Run) -> GraphVersion:
        for graph in self.graphs:
            if graph.name == run.graph_name and run.graph_version in graph.versions:
                return graph
        raise AssertionError(f"claimed a run this worker cannot run: {run}")

    def _config_for(self, run: Run) -> RunnableConfig:
        config: dict[str, Any] = {
            "configurable": {**run.config, "thread_id": run.thread_id},
            "metadata": {**run.metadata, "run_id": run.run_id},
        }
        return with_fence(config, Fence(int(run.fencing_token or 0), run.run_id))

    def _migrate(self, graph: GraphVersion, run: Run, config: RunnableConfig) -> None:
        """Move a run of an older version forward with the graph's migration hook."""
        hook = graph.migrations[run.graph_version]
        marker = migration_marker(run, graph.version)
        if self.registry.migrated_already(run, marker):  # its worker died after it
            logger.info("run %s: the migration is marked done already", run.run_id)
        else:
            migration_hook_result(hook(graph.graph, for_migration_hook(config)))
            self.registry.mark_migrated(run, marker)
        _crashpoints.reached("run:after_migration_hook")
        self.registry.set_version(run, graph.version)
        logger.info(
            "run %s: migrated from version %s to %s",
            run.run_id,
            run.graph_version,
            graph.version,
        )

    @property
    def live_seconds(self) -> float:
        """How long after its last heartbeat this worker still counts as live: three of its
        longest gaps between heartbeats (a heartbeat every third of the lease while it
        runs, a sweep at least every `idle_wait` while it waits)."""
        return 3 * max(self.lease_seconds, self.idle_wait)

    def _sweep_beside(self) -> None:
        """The sweep while a run runs: a failure is logged and the run goes on (the next
        sweep, or another worker's, does the work)."""
        try:
            self._sweep()
        except Exception as exc:
            logger.warning(
                "worker %s: could not sweep runs while running one (%s)",
                self.worker_id,
                first_line(exc),
            )

    def _sweep(self) -> None:
        self._swept_at = time.monotonic()
        changed = self.registry.sweep(
            self.graphs, worker_id=self.worker_id, live_seconds=self.live_seconds
        )
        for row in changed["timed_out"]:
            logger.warning("run %s timed out (not finished by its deadline)", row["run_id"])
        for row in changed["crash_loops"]:
            logger.error(
                "run %s ends as error (%s): its worker died in its last allowed attempt (%s)",
                row["run_id"],
                row["error_type"],
                row["attempt"],
            )
        _telemetry.count(
            "langgraph_durable.runs.stuck",
            len(changed["stuck"]),
            {},
            "Runs flagged as stuck (no progress, or waiting for a person too long)",
        )
        for row in changed["stuck"]:
            logger.warning(
                "run %s of %s looks stuck: %s since %s",
                row["run_id"],
                row["graph_name"],
                "no progress" if row["status"] == "running" else "waiting for a person",
                row["last_progress_at"] if row["status"] == "running" else row["updated_at"],
            )
        for row in changed["blocked"]:
            logger.warning(
                "run %s is blocked: no live worker takes %s version %s (live: %s)",
                row["run_id"],
                row["graph_name"],
                row["graph_version"],
                row["versions"],
            )
