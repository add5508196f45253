"""The run registry under any sequence of requests, as a hypothesis state machine.

Two threads get runs with random multitask strategies, some of which stop at an
`interrupt()`; a worker drains the queue, runs are cancelled and resumed in any order.
After every step, from the raw `langgraph_durable_runs` table and the threads' state:

- at most one run of a thread is running, and after the worker drained the queue none is
  pending or running (a queued run never strands behind a finished one);
- a run in a terminal status (success, error, timeout, cancelled) never changes again;
- a refused request (`reject` on a busy thread, cancelling a finished run, resuming a run
  that is not waiting) is a named error that adds or changes no run;
- no run's node ran twice, and a run that succeeded left its step in its thread's state
  unless a later `rollback` deleted that progress.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from _props import examples, timeout
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    RunConflictError,
    RunRegistry,
    RunStatus,
    Worker,
)

pytestmark = [pytest.mark.properties, timeout()]

CANCELLABLE = {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.DEFERRED, RunStatus.BLOCKED}
TERMINAL = {RunStatus.SUCCESS, RunStatus.ERROR, RunStatus.TIMEOUT, RunStatus.CANCELLED}


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    tag: str
    ask: bool


def ran(state: State) -> dict[str, Any]:
    return {"log": [f"ran:{state['tag']}"]}


def ask(state: State) -> dict[str, Any]:
    if state.get("ask"):
        interrupt(f"ok {state['tag']}?")
    return {}


class RunMachine(RuleBasedStateMachine):
    saver: DurablePostgresSaver
    dsn: str

    def __init__(self) -> None:
        super().__init__()
        builder = StateGraph(State)
        builder.add_node("ran", ran)
        builder.add_node("ask", ask)
        builder.add_edge(START, "ran")
        builder.add_edge("ran", "ask")
        builder.add_edge("ask", END)
        self.graph = GraphVersion(f"g-{uuid.uuid4().hex[:8]}", "1", builder.compile(self.saver))
        self.runs = RunRegistry(self.saver)
        self.worker = Worker(self.saver, [self.graph])
        self.threads = [f"t-{uuid.uuid4().hex[:8]}" for _ in range(2)]
        self.created: list[tuple[str, str, str]] = []  # (run_id, thread, tag)
        self.terminal: dict[str, RunStatus] = {}
        self.rolled_back_after: dict[str, int] = {}  # thread -> index of the last rollback

    def rows(self) -> list[tuple[str, str, str]]:
        with psycopg.connect(self.dsn) as conn:
            return [
                (r[0], r[1], r[2])
                for r in conn.execute(
                    "SELECT run_id, thread_id, status FROM langgraph_durable_runs "
                    "WHERE thread_id = ANY(%s)",
                    [self.threads],
                ).fetchall()
            ]

    @rule(
        thread=st.integers(0, 1),
        strategy=st.sampled_from(["enqueue", "enqueue", "reject", "interrupt", "rollback"]),
        asks=st.booleans(),
    )
    def create(self, thread: int, strategy: str, asks: bool) -> None:
        thread_id = self.threads[thread]
        tag = f"{len(self.created)}"
        before = self.rows()
        try:
            run = self.runs.create(
                self.graph,
                {"tag": tag, "ask": asks, "log": [f"in:{tag}"]},
                thread_id=thread_id,
                multitask_strategy=strategy,
            )
        except RunConflictError:
            assert strategy == "reject"
            assert self.rows() == before, "a rejected run changed the registry"
            return
        self.created.append((run.run_id, thread_id, tag))
        if strategy == "rollback":
            self.rolled_back_after[thread_id] = len(self.created) - 1

    @rule()
    def work(self) -> None:
        self.worker.run_until_idle()
        left = [r for r in self.rows() if r[2] in ("pending", "running")]
        assert left == [], f"runs left after the worker drained the queue: {left}"

    @precondition(lambda self: self.created)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        run_id, _, _ = data.draw(st.sampled_from(self.created), label="run")
        before = self.rows()
        active = self.runs.get(run_id).status in CANCELLABLE
        try:
            self.runs.cancel(run_id)
        except RunConflictError:
            assert not active, "an active run refused to be cancelled"
            assert self.rows() == before, "a refused cancel changed the registry"

    @precondition(lambda self: self.created)
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        run_id, _, _ = data.draw(st.sampled_from(self.created), label="run")
        before = self.rows()
        status = self.runs.get(run_id).status
        try:
            self.runs.resume(run_id, Command(resume="yes"))
        except RunConflictError:
            # Not interrupted, or stopped by a newer run and waiting for no answer.
            assert self.rows() == before, "a refused resume changed the registry"
            return
        assert status is RunStatus.INTERRUPTED, f"a {status.value} run was resumed"

    @invariant()
    def one_at_a_time_and_terminal_stays_terminal(self) -> None:
        rows = self.rows()
        for thread in self.threads:
            running = [r for r in rows if r[1] == thread and r[2] == "running"]
            assert len(running) <= 1
        for run_id, _, status in rows:
            if run_id in self.terminal:
                assert status == self.terminal[run_id].value, f"{run_id} left a final status"
            elif RunStatus(status) in TERMINAL:
                self.terminal[run_id] = RunStatus(status)

    @invariant()
    def each_node_runs_once(self) -> None:
        for thread in self.threads:
            state = self.graph.graph.get_state({"configurable": {"thread_id": thread}})
            log = state.values.get("log", [])
            steps = [entry for entry in log if entry.startswith("ran:")]
            assert len(steps) == len(set(steps)), f"a node ran twice on {thread}: {log}"
            for index, (run_id, run_thread, tag) in enumerate(self.created):
                if run_thread != thread or self.rolled_back_after.get(thread, -1) > index:
                    continue
                if self.terminal.get(run_id) is RunStatus.SUCCESS:
                    assert f"ran:{tag}" in steps, f"run {tag} succeeded but left no step"


@pytest.fixture(scope="module")
def saver(db_dsn: str) -> Iterator[DurablePostgresSaver]:
    with DurablePostgresSaver.from_conn_string(db_dsn) as found:
        found.setup()
        yield found


def test_runs_keep_their_rules_under_any_sequence(saver: DurablePostgresSaver, db_dsn: str) -> None:
    machine = type("Machine", (RunMachine,), {"saver": saver, "dsn": db_dsn})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=examples(15), stateful_step_count=15)
    )
