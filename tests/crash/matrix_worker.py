"""Worker processes of the crash matrix (`matrix.py`): the two example workflows, as they ship.

    python tests/crash/matrix_worker.py seven DSN THREAD MODE SAVER [--stop-before STEP]
    python tests/crash/matrix_worker.py refund DSN GRAPH MODE SAVER --lease SECONDS

DSN is the saver's; the receivers (the outside world) use `--world-dsn` (default DSN), so a
cut between the worker and its database does not also cut the worker's mailer.

`seven` runs `examples/seven_step_workflow.py` on THREAD the way its README tells a user to
after a crash: from the checkpoint when the thread stopped mid-run, else from the input
again. `--stop-before STEP` is the example's own hook: the node writes a marker and waits to
be SIGKILLed from outside. `refund` is a run-registry worker for `examples/northwind_refund.py`
registered under the name GRAPH (one name per trial, so trials do not take each other's
runs); it takes runs until SIGTERM. SAVER picks `DurablePostgresSaver` with `invoke` and a
`Worker`, or `AsyncDurablePostgresSaver` with `ainvoke` and an `AsyncWorker`.

Faults: `LANGGRAPH_DURABLE_CRASH_AT` names a point and the process SIGKILLs itself there
(`langgraph_durable/_crashpoints.py`). With `MATRIX_FAULT=terminate` the process instead
ends its own database sessions at that point (`pg_terminate_backend`, from a side
connection) and goes on; with `MATRIX_FAULT=drop:HOST:PORT` it asks the test's TCP proxy
on that control port to cut every connection, with `MATRIX_FAULT=restart:HOST:PORT` it
asks for the (private) server to be restarted, and goes on once that is done.

`MATRIX_CONTROL=bare` is the matrix's control: `@effect` journals nothing, as if the
examples called their receivers directly; the matrix must then count duplicates.

Exit codes: 0 finished (seven prints its final state as JSON), 4 EffectOutcomeUnknown
(prints `unknown-key: KEY`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import json
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import langgraph_durable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))  # the examples import their `_fakes` module
CONTROL_ENV = "MATRIX_CONTROL"


def bare_effect(*args: Any, **kwargs: Any) -> Any:
    """`@effect` that journals nothing: each call goes straight to the receiver, with a new
    idempotency key per call (the usual mistake: a key made where the call is made)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        takes_key = "idempotency_key" in inspect.signature(fn).parameters

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if takes_key:
                kwargs.setdefault("idempotency_key", uuid.uuid4().hex)
            return fn(*args, **kwargs)

        return call

    return wrap


if os.environ.get(CONTROL_ENV) == "bare":  # the matrix's control: can it see duplicates?
    langgraph_durable.effect = bare_effect  # before the examples import it

import northwind_refund  # noqa: E402
import psycopg  # noqa: E402
import seven_step_workflow  # noqa: E402
from langgraph.types import StateSnapshot  # noqa: E402
from matrix_proxy import ask  # noqa: E402

from langgraph_durable import (  # noqa: E402
    AsyncDurablePostgresSaver,
    AsyncWorker,
    DurablePostgresSaver,
    EffectOutcomeUnknown,
    GraphVersion,
    Worker,
    _crashpoints,
)

EXIT_OUTCOME_UNKNOWN = 4
APP_NAME = "matrix-worker"
SEVEN_INPUT = {"account_id": "acme-001"}


def terminate_own_sessions(dsn: str) -> None:
    """End every other session of this process's application name: the pool's connections."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (f"{APP_NAME}-{os.getpid()}",),
        )


def note_fault(dsn: str, point: str) -> None:
    """Leave a trace that the fault struck (the matrix counts faults that did)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO matrix_faults (pid, point) VALUES (%s, %s)", (os.getpid(), point))


def install_fault(dsn: str) -> None:
    fault = os.environ.get("MATRIX_FAULT", "")
    if fault == "terminate":
        cut: Any = lambda: terminate_own_sessions(dsn)  # noqa: E731
    elif fault.startswith(("drop:", "restart:")):
        command, control = fault.split(":", 1)
        cut = lambda: ask(control, command)  # noqa: E731
    else:
        return

    def strike(point: str) -> None:
        cut()
        note_fault(dsn, point)

    _crashpoints.act_instead(strike)


def named(dsn: str) -> str:
    """The DSN with this process's application name, so a fault can find its sessions."""
    return psycopg.conninfo.make_conninfo(dsn, application_name=f"{APP_NAME}-{os.getpid()}")


# -- seven steps, resumed by hand ------------------------------------------------------------


def finished(state: StateSnapshot) -> bool:
    """A checkpoint with no task left: the run ended (its process may have died after the
    last commit, before `invoke` returned). `tasks`, not `next`: a task whose writes were
    stored before the crash is left out of `next` (README, "After an error")."""
    return state.created_at is not None and not state.tasks


def payload_for(state: StateSnapshot) -> Any:
    """Go on from the checkpoint; with none (never started, or "exit" lost it) the input."""
    return None if state.tasks else SEVEN_INPUT


def seven(dsn: str, world: str, thread: str, mode: Any, saver: str, stop_before: str | None) -> int:
    builder = seven_step_workflow.build(world, thread, stop_before)
    config: Any = {"configurable": {"thread_id": thread}}
    try:
        if saver == "sync":
            with DurablePostgresSaver.from_conn_string(named(dsn)) as sync_saver:
                graph = builder.compile(checkpointer=sync_saver)
                state = graph.get_state(config)
                if finished(state):
                    final = state.values
                else:
                    final = graph.invoke(payload_for(state), config, durability=mode)
        else:

            async def run() -> Any:
                async with AsyncDurablePostgresSaver.from_conn_string(named(dsn)) as async_saver:
                    graph = builder.compile(checkpointer=async_saver)
                    state = await graph.aget_state(config)
                    if finished(state):
                        return state.values
                    return await graph.ainvoke(payload_for(state), config, durability=mode)

            final = asyncio.run(run())
    except EffectOutcomeUnknown as exc:
        print(f"unknown-key: {exc.key}", flush=True)
        return EXIT_OUTCOME_UNKNOWN
    print(json.dumps(final, default=str), flush=True)
    return 0


# -- the refund, run by registry workers -----------------------------------------------------


def refund_worker(dsn: str, world: str, graph_name: str, saver: str, lease: float) -> int:
    builder = northwind_refund.build(world)
    if saver == "sync":
        with DurablePostgresSaver.from_conn_string(named(dsn)) as sync_saver:
            graph = GraphVersion(graph_name, "1", builder.compile(checkpointer=sync_saver))
            worker = Worker(sync_saver, [graph], lease_seconds=lease, idle_wait=0.2)
            signal.signal(signal.SIGTERM, lambda *_: worker.stop())
            print("ready", flush=True)
            worker.run_forever()
        return 0

    async def run() -> None:
        async with AsyncDurablePostgresSaver.from_conn_string(named(dsn)) as async_saver:
            graph = GraphVersion(graph_name, "1", builder.compile(checkpointer=async_saver))
            worker = AsyncWorker(async_saver, [graph], lease_seconds=lease, idle_wait=0.2)
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
            print("ready", flush=True)
            await worker.arun_forever()

    asyncio.run(run())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workflow", choices=["seven", "refund"])
    parser.add_argument("dsn")
    parser.add_argument("name", help="the thread (seven) or the graph name (refund)")
    parser.add_argument("mode", choices=["sync", "async", "exit"])
    parser.add_argument("saver", choices=["sync", "async"])
    parser.add_argument("--stop-before")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--world-dsn")
    args = parser.parse_args()
    world = args.world_dsn or args.dsn
    install_fault(world)
    if args.workflow == "seven":
        return seven(args.dsn, world, args.name, args.mode, args.saver, args.stop_before)
    return refund_worker(args.dsn, world, args.name, args.saver, args.lease)


if __name__ == "__main__":
    sys.exit(main())
