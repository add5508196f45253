"""Runs as data, and every decision about one: pure, shared by both flavours.

A run is one invocation of a registered graph on a thread, kept in
`langgraph_durable_runs` so that any worker can take it, resume it after a crash, and
report on it. The decisions here are taken without a database: what a worker sends to the
graph when it (re)starts a run, and how an outcome (a result, an interrupt, an error)
becomes the run's next status.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import math
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.pregel import Pregel

from langgraph_durable._db import from_our_connections, is_disconnect, process_owner
from langgraph_durable._ids import (
    json_text,
    lone_surrogate,
    storable_text,
    stored_id,
    thread_id_of,
)
from langgraph_durable._wakeups import earliest
from langgraph_durable.errors import (
    ConfigurationError,
    DatabaseUnreachableError,
    EffectDeferred,
    EffectInProgressError,
    EffectOutcomeUnknown,
    EffectResultNotStoredError,
    FencedOutError,
    InvalidDecisionError,
    InvalidInputError,
    LockTimeoutError,
    StatementTimeoutError,
    TransactionConflictError,
    UnserializableValueError,
    WrongArgumentTypeError,
)
from langgraph_durable.serde import encrypts, open_text, seal_text

__all__ = [
    "ACTIVE",
    "FINISHED",
    "LEASE_LOST",
    "MIGRATION_KEY",
    "STRATEGIES",
    "WAIT_FOR_PAUSE_MAX",
    "GraphVersion",
    "MultitaskStrategy",
    "Next",
    "Outage",
    "Outcome",
    "Run",
    "RunStatus",
    "amigration_hook_result",
    "check_async_worker_graphs",
    "check_graphs",
    "check_sync_worker_graphs",
    "first_line",
    "for_migration_hook",
    "is_outage",
    "list_params",
    "log_ids",
    "migration_hook_result",
    "migration_marker",
    "new_run_params",
    "optional_seconds_of",
    "outcome_label",
    "outcome_of",
    "outcome_params",
    "passed_on",
    "run_id_of",
    "run_of",
    "run_span_attributes",
    "seconds_of",
    "sends_input",
    "stopped_from_outside",
    "stored",
    "taken_versions",
    "unstored_outcome",
    "version_of",
    "worker_name",
    "workers_graphs",
    "wrong_saver",
]

MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
STRATEGIES: tuple[str, ...] = ("reject", "enqueue", "interrupt", "rollback")


class RunStatus(str, enum.Enum):
    """A run's status: the Agent Server's words, and three of ours."""

    PENDING = "pending"
    """Waiting for a worker (new, retried after an error, or handed back)."""
    RUNNING = "running"
    """A worker holds its lease and runs it."""
    SUCCESS = "success"
    """Finished; its output is stored."""
    ERROR = "error"
    """Failed `max_attempts` times; the last error is stored."""
    TIMEOUT = "timeout"
    """Not finished by its deadline."""
    INTERRUPTED = "interrupted"
    """Waits at an `interrupt()` (an approval), or was stopped by a newer run."""
    DEFERRED = "deferred"
    """Waits until `retry_at`: a rate limit, or `durable_sleep`."""
    BLOCKED = "blocked"
    """Needs a person: no worker runs its graph version, or an effect's outcome is unknown."""
    CANCELLED = "cancelled"
    """Cancelled (or rolled back) by a person or a newer run."""


ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.DEFERRED, RunStatus.BLOCKED)
"""A thread is busy while it has a run in one of these: runs of a thread go one at a time."""

FINISHED = (
    RunStatus.SUCCESS,
    RunStatus.ERROR,
    RunStatus.TIMEOUT,
    RunStatus.INTERRUPTED,
    RunStatus.CANCELLED,
)

AGENT_SERVER_STATUS: dict[RunStatus, str] = {
    RunStatus.DEFERRED: "pending",
    RunStatus.BLOCKED: "pending",
    RunStatus.CANCELLED: "interrupted",
}
"""Our three extra statuses as a client typed on the Agent Server's literals sees them."""

BLOCKED_VERSION = "version"
BLOCKED_EFFECT = "effect"


@dataclass(frozen=True)
class Run:
    """One run, as the registry stores it."""

    run_id: str
    thread_id: str
    graph_name: str
    graph_version: str
    status: RunStatus
    status_reason: str | None
    multitask_strategy: str
    durability: str
    attempt: int
    max_attempts: int
    config: dict[str, Any]
    metadata: dict[str, Any]
    owner: str | None = None
    fencing_token: int | None = None
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    last_progress_at: datetime | None = None
    step: int | None = None
    retry_at: datetime | None = None
    deadline_at: datetime | None = None
    stuck_since: datetime | None = None
    error_type: str | None = None
    error_message: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    input_after: str | None = None
    stored_input: tuple[str, bytes] | None = field(default=None, repr=False)
    stored_output: tuple[str, bytes] | None = field(default=None, repr=False)
    recovered_after: float | None = field(default=None, repr=False)
    """On a run just claimed from a worker that died: seconds from that worker's last
    heartbeat to this claim (the run's recovery time); None otherwise."""

    @property
    def agent_server_status(self) -> str:
        """The status in the Agent Server's vocabulary (for `langgraph_sdk` types)."""
        return AGENT_SERVER_STATUS.get(self.status, self.status.value)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def superseded(self) -> bool:
        """Stopped by a newer run's `multitask_strategy="interrupt"`: `interrupted`, but at
        no `interrupt()` anyone can answer (its thread went on with the newer run)."""
        return self.status is RunStatus.INTERRUPTED and (self.status_reason or "").startswith(
            superseded_reason("interrupt", "")
        )


def superseded_reason(strategy: str, run_id: str) -> str:
    """The status reason of a run a newer one stopped by its multitask strategy."""
    return f"{strategy}: superseded by run {run_id}"


def run_of(row: Mapping[str, Any], serde: SerializerProtocol | None = None) -> Run:
    """A `langgraph_durable_runs` row as a `Run` (its error text opened with `serde`, which
    sealed it when it encrypts)."""
    stored_input = (row["input_type"], row["input"]) if row.get("input_type") else None
    stored_output = (row["output_type"], row["output"]) if row.get("output_type") else None
    return Run(
        run_id=row["run_id"],
        thread_id=row["thread_id"],
        graph_name=row["graph_name"],
        graph_version=row["graph_version"],
        status=RunStatus(row["status"]),
        status_reason=row["status_reason"],
        multitask_strategy=row["multitask_strategy"],
        durability=row["durability"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        config=_opened_config(serde, row["config"]),
        metadata=dict(row["metadata"] or {}),
        owner=row["owner"],
        fencing_token=row["fencing_token"],
        lease_expires_at=row["lease_expires_at"],
        heartbeat_at=row["heartbeat_at"],
        last_progress_at=row["last_progress_at"],
        step=row["step"],
        retry_at=row["retry_at"],
        deadline_at=row["deadline_at"],
        stuck_since=row["stuck_since"],
        error_type=row["error_type"],
        error_message=open_text(serde, row["error_message"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        input_after=row["input_after"],
        stored_input=stored_input,
        stored_output=stored_output,
        recovered_after=row.get("recovered_after_seconds"),
    )


def _positive_duration(value: object, what: str) -> timedelta:
    """A `GraphVersion` duration: a timedelta, or seconds as every other duration of the
    API takes them; > 0 and at most ten years. An int here reached the worker's sweep,
    which stopped the worker with an AttributeError; a negative one flagged every run."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    return timedelta(seconds=_seconds(seconds, f"GraphVersion {what}", ", or a timedelta"))


@dataclass(frozen=True)
class GraphVersion:
    """A graph a worker runs, under a name and a version that runs are pinned to.

    Args:
        name: The graph's name; runs are created for it by name.
        version: This code's version. A run keeps the version that started it; a worker
            runs it only if it is this version or one listed in `compatible_with`.
        graph: The compiled graph, with a langgraph-durable saver as its checkpointer.
        compatible_with: Older versions whose runs this code can continue as they are.
        migrations: Older versions this code can continue after moving their state:
            `{old_version: hook(graph, config)}`; the hook runs once (e.g. calls
            `graph.update_state(config, ...)`) before the run continues as this version.
            `config` is the run's (its thread, its lease's fencing token) without the run
            id in its metadata (`for_migration_hook`). Once it has returned, the worker
            marks the migration done in the metadata of the thread's latest checkpoint:
            a worker that dies before recording the new version leaves that mark, and
            the next worker does not run the hook again; one that dies inside the hook
            leaves none, and the hook runs again from its start. A sync `Worker` refuses
            an `async def` hook (use `AsyncWorker`).
        stuck_after: A running run without progress (a committed step) for this long is
            flagged as stuck, once: a timedelta, or seconds.
        waiting_stuck_after: An interrupted run (waiting for a person) this long is
            flagged too; None never flags waiting runs.
    """

    name: str
    version: str
    graph: Pregel[Any, Any, Any, Any] = field(repr=False)
    compatible_with: frozenset[str] = frozenset()
    migrations: Mapping[str, Any] = field(default_factory=dict, repr=False)
    stuck_after: timedelta = timedelta(minutes=15)
    waiting_stuck_after: timedelta | None = None

    def __post_init__(self) -> None:
        for what in ("name", "version"):
            text_of(getattr(self, what), f"GraphVersion {what}")
        if isinstance(self.compatible_with, str):
            raise WrongArgumentTypeError(
                f"GraphVersion compatible_with={self.compatible_with!r}: pass a collection of "
                "versions, e.g. {'1.0'}, not one string."
            )
        try:
            compatible = frozenset(self.compatible_with)
        except TypeError:
            raise WrongArgumentTypeError(
                f"GraphVersion compatible_with={self.compatible_with!r}: pass a collection "
                "of versions, e.g. {'1.0'}."
            ) from None
        if not isinstance(self.migrations, Mapping):
            raise WrongArgumentTypeError(
                f"GraphVersion migrations={self.migrations!r}: pass a dict of "
                "{old_version: hook(graph, config)}."
            )
        for older in [*compatible, *self.migrations]:
            text_of(older, "GraphVersion compatible_with / migrations version")
        for older, hook in self.migrations.items():
            if not callable(hook):
                raise ConfigurationError(
                    f"GraphVersion {self.name!r}: the migration for version {older!r} is "
                    f"{hook!r}, not a function; pass hook(graph, config)."
                )
        both = sorted(compatible & set(self.migrations))
        if both:
            raise ConfigurationError(
                f"GraphVersion {self.name!r}: version(s) {', '.join(both)} are both in "
                "compatible_with (runs continue as they are) and in migrations (runs are "
                "moved first), so the hook would never run; list each in one of them."
            )
        object.__setattr__(self, "compatible_with", compatible)
        stuck_after = _positive_duration(self.stuck_after, "stuck_after")
        object.__setattr__(self, "stuck_after", stuck_after)
        if self.waiting_stuck_after is not None:
            waiting = _positive_duration(self.waiting_stuck_after, "waiting_stuck_after")
            object.__setattr__(self, "waiting_stuck_after", waiting)
        breakpoints = [
            *(getattr(self.graph, "interrupt_before_nodes", None) or ()),
            *(getattr(self.graph, "interrupt_after_nodes", None) or ()),
        ]
        if breakpoints:
            raise ConfigurationError(
                f"GraphVersion {self.name!r}: the graph is compiled with interrupt_before / "
                f"interrupt_after ({', '.join(map(str, breakpoints))}). A run stopped at such a "
                "breakpoint asks no question and would be recorded as finished. In a run, "
                "wait for a person with interrupt() inside the node (see approvals), and "
                "compile the graph without breakpoints."
            )

    @property
    def versions(self) -> list[str]:
        """Every run version this graph takes: its own, compatible ones, migrated ones."""
        return sorted({self.version, *self.compatible_with, *self.migrations})


def stored(serde: SerializerProtocol, value: Any) -> tuple[str, bytes]:
    """A run's input or output as the registry stores it (the saver's serializer)."""
    try:
        return serde.dumps_typed(value)
    except Exception as exc:
        raise UnserializableValueError(
            f"A run's input must be serializable like graph state ({exc}); nothing was created."
        ) from exc


def new_run_params(
    serde: SerializerProtocol,
    graph: str | GraphVersion,
    input: Any,
    *,
    version: str | None,
    thread_id: str,
    config: RunnableConfig | None,
    metadata: Mapping[str, Any] | None,
    durability: str,
    multitask_strategy: str,
    max_attempts: int,
    timeout: float | None,
    run_id: str,
) -> dict[str, Any]:
    """The `run_insert` parameters of a new run, every argument checked first (I8)."""
    if isinstance(graph, GraphVersion):
        name, version = graph.name, version or graph.version
    else:
        name = graph
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"graph={graph!r}: pass a GraphVersion or a graph name.")
    name = text_of(name, "graph")
    if version is None or version == "":
        raise InvalidInputError(
            f"A run of {name!r} needs the graph version it is pinned to: pass version=, or "
            "a GraphVersion as graph."
        )
    version = version_of(version)
    if durability not in ("sync", "async", "exit"):
        raise InvalidInputError(f"durability={durability!r}: use 'sync', 'async' or 'exit'.")
    if multitask_strategy not in STRATEGIES:
        raise InvalidInputError(
            f"multitask_strategy={multitask_strategy!r}: use one of {', '.join(STRATEGIES)}."
        )
    if (
        not isinstance(max_attempts, int)
        or isinstance(max_attempts, bool)
        or not 1 <= max_attempts <= MAX_ATTEMPTS
    ):
        raise InvalidInputError(
            f"max_attempts={max_attempts!r}: use a whole number from 1 to {MAX_ATTEMPTS:,}."
        )
    timeout = optional_seconds_of(timeout, "timeout")
    if config is not None and not isinstance(config, Mapping):
        raise InvalidInputError(
            f"config must be a RunnableConfig (a dict such as {{'configurable': {{...}}}}), "
            f"got {type(config).__name__}; nothing was created."
        )
    ignored = sorted(str(k) for k in (config or {}) if k != "configurable")
    if ignored:
        # Only `configurable` is stored with the run; anything else was dropped without a
        # word (a `recursion_limit` the run then did not have).
        raise InvalidInputError(
            f"config sets {', '.join(ignored)}: a run stores only config's configurable "
            "values (pass metadata= for metadata); set the rest on the graph itself "
            "(graph.with_config(recursion_limit=...)) before giving it to the worker. "
            "Nothing was created."
        )
    found = (config or {}).get("configurable")
    if found is not None and not isinstance(found, Mapping):
        raise InvalidInputError(
            f"config's configurable must be a dict of values, got {type(found).__name__}; "
            "nothing was created."
        )
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInputError(
            f"metadata must be a dict of JSON values, got {type(metadata).__name__}; nothing "
            "was created."
        )
    configurable = dict(found or {})
    private = [k for k in configurable if k.startswith("__") or k == "thread_id"]
    if private:
        raise InvalidInputError(
            f"config sets {', '.join(private)}, which the worker sets itself; leave them out."
        )
    pinned = [k for k in configurable if k in PINNING_KEYS]
    if pinned:
        # Every execution would start again from that checkpoint: a retry after a crash
        # would fork the thread instead of going on from where the run got to.
        raise InvalidInputError(
            f"config sets {', '.join(pinned)}: a run always goes on from its thread's "
            "latest checkpoint, so that a retry continues it instead of forking the thread. "
            "To run from an earlier checkpoint, fork it first (graph.update_state with that "
            "checkpoint's config, or copy the thread) and create the run on the result."
        )
    input_type, input_blob = stored(serde, input)
    return {
        "run_id": stored_id(run_id, "run_id"),
        "thread_id": stored_id(thread_id, "thread_id"),
        "graph_name": name,
        "graph_version": version,
        "multitask_strategy": multitask_strategy,
        "durability": durability,
        "input_type": input_type,
        "input": input_blob,
        "input_after": None,
        "config": _sealed_config(serde, _json_object(configurable, "config's configurable values")),
        "metadata": _json_object(dict(metadata or {}), "metadata"),
        "max_attempts": max_attempts,
        "timeout": timeout,
    }


PINNING_KEYS = ("checkpoint_id", "checkpoint_ns", "checkpoint_map")
"""`configurable` keys that pin an invocation to one checkpoint: not allowed in a run."""


def run_id_of(value: object) -> str:
    """A run id to look up: text Postgres can hold (`InvalidThreadIdError` otherwise)."""
    return thread_id_of(value, "run_id")


def text_of(value: object, what: str) -> str:
    """A name given by a caller (a graph name, a version): non-empty text Postgres can
    store (no NUL, no lone surrogate)."""
    if not isinstance(value, str) or not value or "\x00" in value:
        raise InvalidInputError(f"{what}={value!r}: use a non-empty string without NUL.")
    if lone_surrogate(value) is not None:
        raise InvalidInputError(f"{what}={value!r} is not valid text (a lone surrogate).")
    return value


def version_of(value: object) -> str:
    """A graph version given by a caller: a non-empty string without NUL."""
    return text_of(value, "version")


WAIT_FOR_PAUSE_MAX = 0.25
"""The longest pause between two looks of `wait_for` (seconds)."""

MAX_ATTEMPTS = 1_000_000
"""The most executions a run may be given (`attempt` is a 32-bit column)."""

MAX_SECONDS = 10 * 365 * 86_400.0
"""The longest duration accepted (ten years): longer ones overflow a timer or an interval."""


def seconds_of(value: object, what: str) -> float:
    """A duration in seconds given by a caller: a finite number > 0, at most ten years.

    Checked before it reaches a timer or an SQL interval, where NaN, infinity, text or a
    huge number would be a driver error or an endless wait.
    """
    return _seconds(value, what, "")


def optional_seconds_of(value: object, what: str) -> float | None:
    """Like `seconds_of`, or None (no limit)."""
    return None if value is None else _seconds(value, what, ", or None")


def _seconds(value: object, what: str, alternative: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= MAX_SECONDS
    ):
        raise InvalidInputError(
            f"{what}={value!r}: pass a number of seconds > 0 and at most ten years{alternative}."
        )
    return float(value)


def worker_name(name: object) -> str:
    """A worker's id: the name given (text Postgres can store), or host:pid:... and a
    random suffix."""
    if name is None:
        return f"{process_owner()}:{uuid.uuid4().hex[:8]}"
    return stored_id(name, "worker_id")


def list_params(
    status: object, thread_id: object, graph_name: object, limit: object
) -> dict[str, Any]:
    """The `run_list` parameters, every filter checked first (I8)."""
    if status is None:
        status_value = None
    else:
        try:
            status_value = RunStatus(status).value
        except ValueError:
            known = ", ".join(s.value for s in RunStatus)
            raise InvalidInputError(f"status={status!r}: use one of {known}.") from None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise InvalidInputError(f"limit={limit!r}: use a whole number >= 0.")
    if graph_name is not None:
        graph_name = text_of(graph_name, "graph_name")
    return {
        "status": status_value,
        "thread_id": None if thread_id is None else thread_id_of(thread_id),
        "graph_name": graph_name,
        "limit": limit,
    }


SEALED_CONFIG_KEY = "__sealed__"


def _sealed_config(serde: SerializerProtocol, text: str) -> str:
    """A run's `configurable` values as stored: encrypted when the serializer encrypts
    (they are what the worker passes to the graph, API keys included)."""
    if not encrypts(serde):
        return text
    return json.dumps({SEALED_CONFIG_KEY: seal_text(serde, text)})


def _opened_config(serde: SerializerProtocol | None, stored: Any) -> dict[str, Any]:
    found = dict(stored or {})
    if set(found) == {SEALED_CONFIG_KEY}:
        opened = open_text(serde, found[SEALED_CONFIG_KEY])
        try:
            return dict(json.loads(opened or "{}"))
        except ValueError:
            return {}
    return found


def _json_object(value: dict[str, Any], what: str) -> str:
    return json_text(value, f"The run's {what}")


def outcome_params(serde: SerializerProtocol, run: Run, outcome: Outcome) -> dict[str, Any]:
    """The `run_finish` parameters of an outcome."""
    assert outcome.status is not None
    output_type = output = None
    if outcome.status in (RunStatus.SUCCESS, RunStatus.INTERRUPTED):
        try:
            output_type, output = serde.dumps_typed(outcome.output)
        except Exception:  # an output that cannot be stored is not a reason to fail the run
            output_type = output = None
    # Every text is the run's own (its error's message, a reason quoting it): it may hold
    # a NUL or a lone surrogate, which Postgres refuses, and the run would stay running.
    error, message = outcome.error, outcome.error_message or ""
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "fence_token": run.fencing_token,
        "refund": not outcome.counted,
        "status": outcome.status.value,
        "reason": None if outcome.reason is None else storable_text(outcome.reason),
        "retry_at": outcome.retry_at,
        "retry_in": outcome.retry_in,
        "output_type": output_type,
        "output": output,
        "error_type": None if error is None else storable_text(type(error).__name__),
        "error_message": (
            None if error is None else seal_text(serde, storable_text(message)[:4000])
        ),
    }


def taken_versions(graphs: Sequence[GraphVersion]) -> dict[str, list[str]]:
    """The (name, version) pairs of runs a worker takes, as the parallel `names` and
    `versions` arrays `run_claim` and `runs_next_due` join on (they must agree)."""
    return {
        "names": [g.name for g in graphs for _ in g.versions],
        "versions": [v for g in graphs for v in g.versions],
    }


def workers_graphs(graphs: Sequence[GraphVersion], live_seconds: float) -> list[dict[str, Any]]:
    """What a worker announces: each graph's name, the run versions it takes, and how long
    after its last heartbeat it still counts as live."""
    return [
        {"name": g.name, "version": g.version, "versions": g.versions, "live_seconds": live_seconds}
        for g in graphs
    ]


def check_graphs(graphs: Sequence[GraphVersion], saver: Any) -> list[GraphVersion]:
    """A worker's graphs: at least one, one per name, each compiled with the worker's saver."""
    given: object = graphs
    found: list[Any]
    try:
        found = [given] if isinstance(given, GraphVersion) else list(graphs)
    except TypeError:  # None, a number: not a collection
        found = []
    if not found or not all(isinstance(g, GraphVersion) for g in found):
        raise ConfigurationError(
            "A worker needs its graphs as a list of GraphVersion(name, version, graph) objects."
        )
    names = [g.name for g in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigurationError(
            f"A worker runs one version per graph name; {', '.join(twice)} is given twice "
            "(list older versions in compatible_with or migrations instead)."
        )
    for g in found:
        if getattr(g.graph, "checkpointer", None) is not saver:
            raise ConfigurationError(
                f"Graph {g.name!r} must be compiled with the worker's saver "
                "(builder.compile(checkpointer=saver)): its checkpoints carry the run's "
                "fencing token and progress."
            )
    return found


def check_async_worker_graphs(graphs: Sequence[GraphVersion], saver: Any) -> list[GraphVersion]:
    """`check_graphs` for an async worker, which awaits an async migration hook (the
    twin of `check_sync_worker_graphs`, which the sync worker is generated to call)."""
    return check_graphs(graphs, saver)


def check_sync_worker_graphs(graphs: Sequence[GraphVersion], saver: Any) -> list[GraphVersion]:
    """`check_graphs`, and no `async def` migration hook: a sync worker cannot await it."""
    found = check_graphs(graphs, saver)
    for g in found:
        for version, hook in g.migrations.items():
            if inspect.iscoroutinefunction(hook):
                raise ConfigurationError(
                    f"Graph {g.name!r}: the migration hook for version {version!r} is an "
                    "async function, which a sync Worker cannot await; run the graph in an "
                    "AsyncWorker, or make the hook a plain function."
                )
    return found


MIGRATION_KEY = "langgraph_durable_migration"
"""The checkpoint metadata key of a migration's mark (`migration_marker`); the SQL blocks
`run_mark_migrated` and `run_migrated_already` spell it too."""


def migration_marker(run: Run, to_version: str) -> str:
    """The mark a migration leaves under `MIGRATION_KEY` in the metadata of the thread's
    latest checkpoint once its hook has returned (`run_mark_migrated`): this run, moved
    from its version to `to_version`."""
    return f"{run.run_id}:{run.graph_version}->{to_version}"


def for_migration_hook(config: RunnableConfig) -> RunnableConfig:
    """The run's config for a version's migration hook, without the run id in its
    metadata: LangGraph copies the metadata into the checkpoint `update_state` writes, and
    takes a checkpoint carrying the run's id for the run's own, resuming from it with the
    run's input dropped (a run not started yet, or the answer a resumed run was given)."""
    metadata = {k: v for k, v in (config.get("metadata") or {}).items() if k != "run_id"}
    return cast(RunnableConfig, {**config, "metadata": metadata})


async def amigration_hook_result(value: Any) -> Any:
    """A migration hook's result: awaited when the hook is async (an async worker)."""
    if inspect.isawaitable(value):
        return await value
    return value


def migration_hook_result(value: Any) -> Any:
    """A migration hook's result in a sync worker, which cannot await one: the run went
    on as the new version with its state never moved."""
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise ConfigurationError(
            "A migration hook returned an awaitable in a sync Worker, which cannot await "
            "it; nothing was migrated. Run the graph in an AsyncWorker, or make the hook a "
            "plain function."
        )
    return value


def sends_input(run: Run, latest_of_run: str | None) -> bool:
    """Whether a worker (re)starting `run` sends its stored input, or `None` to resume.

    `latest_of_run` is the latest checkpoint this run wrote. None: LangGraph never took
    the input in (the run had not started, or crashed under durability="exit" before
    anything was saved), so it is sent (again). Otherwise the run resumes from its
    checkpoint with `None`, in every durability mode; except when a later input (the
    `Command` that answers an interrupt) was given at checkpoint `run.input_after` and no
    newer checkpoint shows it taken in yet.
    """
    if latest_of_run is None:
        return True
    if run.input_after is None:
        return False
    return latest_of_run <= run.input_after


class Next(enum.Enum):
    """What a worker does with a run after executing it."""

    FINISH = "finish"  # write the run's new status (conditional on the fencing token)
    LOST = "lost"  # another worker holds the run now: write nothing


@dataclass(frozen=True)
class Outcome:
    """A run's next status after an execution, and what to store with it."""

    next: Next
    status: RunStatus | None = None
    reason: str | None = None
    retry_at: datetime | None = None
    retry_in: float | None = None
    error: BaseException | None = None
    output: Any = None
    counted: bool = True
    """Whether this execution counts against `max_attempts`: one that failed or succeeded
    does; one that ended waiting (an interrupt, a retry time, an unknown effect), was
    handed back or lost the database gives its attempt back, so waiting is never what
    uses a run's attempts up."""
    message: str | None = None
    """The error message to store instead of the error's own text (`unstored_outcome`)."""

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else type(self.error).__name__

    @property
    def error_message(self) -> str | None:
        if self.message is not None:
            return self.message
        return None if self.error is None else str(self.error)

    def handed_back(self) -> Outcome:
        """The worker is stopping mid-run: the run goes back to the queue at once."""
        return Outcome(
            Next.FINISH,
            RunStatus.PENDING,
            reason="handed back: its worker stopped",
            retry_in=0.0,
            error=self.error,
            counted=False,
        )


def unstored_outcome(outcome: Outcome, failure: BaseException) -> Outcome:
    """What a worker records when storing `outcome` failed for a reason that is not an
    outage (`failure`): the run ends as `error`, with the run's own error type (else the
    failure's) and a message saying what could not be stored and why.

    Letting `failure` escape would leave the run `running`: the next worker would take
    it, fail the same way and stop too, until the run ended as `WorkerLost` with the
    real error lost. Only `failure`'s text is read here, never the run's error's, whose
    own `__str__` may be what failed.
    """
    ended = "ended" if outcome.status is None else f"ended as {outcome.status.value}"
    cause = "" if outcome.error is None else f" after {type(outcome.error).__name__}"
    return Outcome(
        Next.FINISH,
        RunStatus.ERROR,
        reason="outcome not stored",
        error=failure if outcome.error is None else outcome.error,
        message=(
            f"The run {ended}{cause}, but that outcome could not be stored "
            f"({type(failure).__name__}: {first_line(failure)}); it is recorded as error."
        ),
    )


def backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before retrying a run that failed `attempt` times: 1, 2, 4... up to 60."""
    base = min(60.0, 2.0 ** max(0, attempt - 1))
    return base * (rng or random).uniform(0.8, 1.2)


def is_outage(exc: BaseException) -> bool:
    """Whether an error means our database could not be reached (a restart, the network, a
    pool that found no live connection in time), or aborted one of our transactions to
    break a deadlock or a serialization conflict, rather than anything about the run: try
    again after a pause, and give the run its attempt back.

    Only errors raised on the connections langgraph-durable lent (the saver's, the
    journal's, the registry's) count: a node whose own database connection fails has
    failed like with any other error, and uses an attempt up.
    """
    if isinstance(exc, (DatabaseUnreachableError, TransactionConflictError)):
        return True
    return is_disconnect(exc) and from_our_connections(exc)


def waited_out(exc: BaseException) -> bool:
    """Whether a worker waits out an error of one of its own statements (taking, finishing
    or sweeping runs) and tries again: an outage (`is_outage`), or a lock timeout or a
    statement timeout, as when a registry change, a migration or a `LOCK TABLE` holds a
    row or a table longer than the saver's `lock_timeout` (or, with none set, its
    `statement_timeout`, which then ends the wait); the run it concerns is not at fault.

    A statement that always runs too long would have the worker try again for ever, so
    these waits are bounded like an outage's: the worker gives up after
    `database_timeout` (unless that is None) with `DatabaseUnreachableError`, naming the
    last error."""
    return is_outage(exc) or isinstance(exc, (LockTimeoutError, StatementTimeoutError))


def stopped_from_outside(exc: BaseException, *, stopping: bool) -> bool:
    """Whether an execution that ended in `exc` (a BaseException that is no Exception) was
    stopped from outside its run: the worker's `stop()`, Ctrl-C, or a cancellation of the
    worker's own task. Such a run goes back to the queue with its attempt given back.

    Anything else (a node calling `sys.exit()`, a stray `CancelledError` that nothing
    cancelling the worker raised) is the run's own doing: it counts as a failed attempt,
    so a run that keeps stopping its workers ends as `error` instead of looping. Python
    3.10 cannot tell a stray `CancelledError` from a cancellation (`Task.cancelling` is
    3.11's), so there every `CancelledError` counts as from outside.
    """
    if stopping or isinstance(exc, KeyboardInterrupt):
        return True
    if not isinstance(exc, asyncio.CancelledError):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop in this thread: a sync worker, nothing cancels it
        return False
    if task is None:
        return False
    cancelling = getattr(task, "cancelling", None)
    return True if cancelling is None else bool(cancelling())


def passed_on(outcome: Outcome) -> BaseException | None:
    """What a worker raises again after recording an outcome: the run's own `sys.exit()`
    (or another BaseException it raised; its attempt counted), since the process was asked
    to stop. Not a stray `CancelledError`: nothing is cancelling the worker, so it goes on."""
    error = outcome.error
    if error is None or isinstance(error, (Exception, asyncio.CancelledError)):
        return None
    return error


def first_line(exc: BaseException) -> str:
    """An error's first line, for log lines and messages (driver errors run on)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass
class Outage:
    """A worker's view of one database outage: how long to wait before looking again, and
    when to give up (`give_up_after` seconds after the first failure; None: never)."""

    give_up_after: float | None
    started: float | None = None
    failures: int = 0

    def failed(self, now: float | None = None) -> float | None:
        """One more failed try: seconds to wait before the next, or None to give up."""
        now = time.monotonic() if now is None else now
        self.started = now if self.started is None else self.started
        self.failures += 1
        if self.give_up_after is not None and now - self.started >= self.give_up_after:
            return None
        delay = min(5.0, 0.1 * 2.0 ** (self.failures - 1)) * random.uniform(0.8, 1.2)
        if self.give_up_after is not None:
            delay = min(delay, max(0.0, self.started + self.give_up_after - now))
        return delay

    def over(self, now: float | None = None) -> float | None:
        """The database answered again: how long the outage lasted (None if none was)."""
        if self.started is None:
            return None
        lasted = (time.monotonic() if now is None else now) - self.started
        self.started, self.failures = None, 0
        return lasted


LEASE_LOST = "the run's lease was taken over"
"""Why a worker drains a run it no longer holds (`RunControl.request_drain`): LangGraph
then stops it once the step under way ends."""


def outcome_of(
    run: Run,
    *,
    error: BaseException | None = None,
    output: Any = None,
    interrupted: bool = False,
    wake_at: datetime | None = None,
) -> Outcome:
    """How an execution of `run` (attempt `run.attempt`) ends: its next status.

    `wake_at`: the earliest wake-up its branches asked for (`_wakeups.py`); a deferred
    run is parked until it when it comes before the time of the error LangGraph raised."""
    if error is None:
        if interrupted:
            return Outcome(Next.FINISH, RunStatus.INTERRUPTED, output=output, counted=False)
        return Outcome(Next.FINISH, RunStatus.SUCCESS, output=output)
    if isinstance(error, FencedOutError):
        return Outcome(Next.LOST, error=error)
    if isinstance(error, (EffectDeferred, EffectInProgressError)):
        # Stored as the time it names, which is the database's clock (a rate limit's
        # retry time and a lease's end come from the journal, a sleep's wake-up time from
        # `clock_timestamp()`), the clock the registry finds a run due by. Turned into a
        # wait on this host's clock, it was off by the host's drift: deferred by a worker
        # whose clock ran ahead, a run came due at once and was deferred again, over and
        # over, until its time came; by one whose clock ran behind, it woke that much late.
        # An effect held by another attempt (a worker that lost this run during an outage
        # and has not given the attempt up) is waited for, not counted as the run failing:
        # once its lease runs out, the run takes the attempt over.
        until = error.retry_at if isinstance(error, EffectDeferred) else error.lease_expires_at
        until = earliest([t for t in (until, wake_at) if t is not None])
        if until is None:  # no time given: look again in about a second
            return Outcome(
                Next.FINISH,
                RunStatus.DEFERRED,
                reason=str(error),
                retry_in=backoff(1),
                counted=False,
            )
        return Outcome(
            Next.FINISH,
            RunStatus.DEFERRED,
            reason=str(error),
            retry_at=until if until.tzinfo is not None else until.replace(tzinfo=timezone.utc),
            counted=False,
        )
    if isinstance(error, (EffectOutcomeUnknown, EffectResultNotStoredError)):
        return Outcome(
            Next.FINISH,
            RunStatus.BLOCKED,
            reason=(
                f"{BLOCKED_EFFECT}: {error} This run is in the run registry: once the key is "
                f"resolved, retry the run (`langgraph-durable runs retry {run.run_id}`, or "
                "RunRegistry.retry(run_id)) rather than invoke the thread yourself."
            ),
            error=error,
            counted=False,
        )
    if isinstance(error, InvalidDecisionError) and error.thread_id == run.thread_id:
        # The approval node refused the answer the run was resumed with, before acting on
        # it: the question still waits (one of this run's thread; an answer a node sent to
        # another thread is that node's failure). Counted as a failure, the run would be retried
        # with the same stored answer until it ended as error; interrupted, uncounted,
        # it takes a corrected answer through `resume`.
        return Outcome(
            Next.FINISH,
            RunStatus.INTERRUPTED,
            reason=f"answer refused, the question still waits: {first_line(error)}",
            error=error,
            counted=False,
        )
    if is_outage(error):
        # The database went away under the run (a restart, the network): nothing is wrong
        # with the run, so it goes back to the queue even on its last attempt.
        return Outcome(
            Next.FINISH,
            RunStatus.PENDING,
            reason=f"database unavailable: {first_line(error)}",
            retry_in=backoff(min(run.attempt, 3)),
            error=error,
            counted=False,
        )
    if run.attempt < run.max_attempts:
        return Outcome(Next.FINISH, RunStatus.PENDING, retry_in=backoff(run.attempt), error=error)
    return Outcome(Next.FINISH, RunStatus.ERROR, error=error)


def log_ids(run: Run) -> dict[str, Any]:
    """The ids a log record about a run carries (`extra=`), for structured log handlers:
    the same ones its span carries."""
    return {
        "langgraph_durable_run_id": run.run_id,
        "langgraph_durable_thread_id": run.thread_id,
        "langgraph_durable_graph": run.graph_name,
    }


def outcome_label(outcome: Outcome) -> str:
    """How an execution ended, in one word for spans and metrics ("lost": taken over)."""
    return outcome.status.value if outcome.status is not None else "lost"


def run_span_attributes(run: Run) -> dict[str, Any]:
    """What a run's span (and its metrics) carry: the ids an operator searches by."""
    return {
        "langgraph_durable.run_id": run.run_id,
        "langgraph_durable.thread_id": run.thread_id,
        "langgraph_durable.graph": run.graph_name,
        "langgraph_durable.graph_version": run.graph_version,
        "langgraph_durable.attempt": run.attempt,
        "langgraph_durable.recovered_after_s": run.recovered_after,
    }


def wrong_saver(saver: object) -> ConfigurationError:
    """The error for a registry made on a saver that is not ours, or of the other kind."""
    return ConfigurationError(
        f"A run registry keeps its runs in langgraph-durable's tables; got a "
        f"{type(saver).__name__}. Use RunRegistry with a DurablePostgresSaver, or "
        "AsyncRunRegistry with an AsyncDurablePostgresSaver."
    )
