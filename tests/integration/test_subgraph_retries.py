"""A node with a `RetryPolicy` that runs subgraphs: its effects and events act once.

LangGraph numbers the subgraphs one task execution starts (`node:id`, `node:id|1`, ...)
and its in-process retries go on counting, so a retry ran the first subgraph as
`node:id|2`: default keys and event ids derived from the namespace changed, and the
subgraph's effects acted (and its events went out) once per attempt.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Durability, RetryPolicy, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    current_effect_key,
    effect,
)
from langgraph_durable.outbox import emit

RETRY = RetryPolicy(max_attempts=3, initial_interval=0, jitter=False, retry_on=RuntimeError)


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class Scenario:
    """A parent node that runs `subgraphs` subgraphs (each: an effect, an event), then
    fails `failures` times before it succeeds; `nested` puts each subgraph's work one
    subgraph deeper."""

    def __init__(self, *, subgraphs: int, failures: int, nested: bool) -> None:
        self.acted: list[str] = []
        self.attempts = 0
        self.failures = failures

        @effect(name="retries.notify")
        def notify(which: str) -> str:
            self.acted.append(current_effect_key())
            return f"notified {which}"

        def work(state: State) -> State:
            which = state["log"][-1] if state.get("log") else "?"
            notify(which)
            emit("retries.notified", {"which": which})
            return {"log": [f"done {which}"]}

        self.sub = one_node_graph("work", work)
        if nested:
            inner = self.sub

            def around(state: State) -> State:
                return inner.invoke(state)  # type: ignore[return-value]

            self.sub = one_node_graph("around", around)
        self.subgraphs = subgraphs

    def parent(self, state: State) -> State:
        self.attempts += 1
        log: list[str] = []
        for n in range(self.subgraphs):
            log += self.sub.invoke({"log": [f"sub{n}"]})["log"]
        if self.attempts <= self.failures:
            raise RuntimeError(f"attempt {self.attempts} fails after its subgraphs")
        return {"log": log}

    async def aparent(self, state: State) -> State:
        self.attempts += 1
        log: list[str] = []
        for n in range(self.subgraphs):
            log += (await self.sub.ainvoke({"log": [f"sub{n}"]}))["log"]
        if self.attempts <= self.failures:
            raise RuntimeError(f"attempt {self.attempts} fails after its subgraphs")
        return {"log": log}

    def graph(self, checkpointer: Any, *, use_async: bool = False) -> Any:
        builder = StateGraph(State)
        builder.add_node("outer", self.aparent if use_async else self.parent, retry_policy=RETRY)
        builder.add_edge(START, "outer")
        return builder.compile(checkpointer=checkpointer)


def one_node_graph(name: str, fn: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(State)
    builder.add_node(name, fn)
    builder.add_edge(START, name)
    return builder.compile()


def events_of(dsn: str, thread: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return [
            row[0]
            for row in conn.execute(
                "SELECT payload->>'which' FROM langgraph_durable_outbox WHERE thread_id = %s"
                " ORDER BY seq",
                (thread,),
            )
        ]


@pytest.mark.parametrize("mode", ["sync", "exit"])
@pytest.mark.parametrize("nested", [False, True], ids=["subgraph", "nested"])
def test_a_retried_node_s_subgraphs_act_once(
    saver: DurablePostgresSaver, db_dsn: str, mode: Durability, nested: bool
) -> None:
    scenario = Scenario(subgraphs=2, failures=2, nested=nested)
    thread = f"retries-{uuid.uuid4()}"
    result = scenario.graph(saver).invoke(
        {"log": []}, {"configurable": {"thread_id": thread}}, durability=mode
    )
    assert scenario.attempts == 3
    assert result["log"][-1] == "done sub1"
    assert len(scenario.acted) == 2  # once per subgraph, not once per attempt
    assert len(set(scenario.acted)) == 2
    if mode == "sync":  # under "exit" a subgraph's own steps store nothing
        assert events_of(db_dsn, thread) == ["sub0", "sub1"]


def test_a_retried_subgraph_node_acts_once(saver: DurablePostgresSaver, db_dsn: str) -> None:
    """The compiled subgraph is the node itself: its first node acts, its second fails
    once, and the parent's retry policy runs the whole subgraph again."""
    scenario = Scenario(subgraphs=1, failures=0, nested=False)
    thread = f"retries-{uuid.uuid4()}"
    failed: list[int] = []

    def check(state: State) -> State:
        if not failed:
            failed.append(1)
            raise RuntimeError("fails once, after the subgraph's first node acted")
        return {"log": ["checked"]}

    sub = StateGraph(State)
    sub.add_node("work", scenario.sub)
    sub.add_node("check", check)
    sub.add_edge(START, "work")
    sub.add_edge("work", "check")
    builder = StateGraph(State)
    builder.add_node("outer", sub.compile(), retry_policy=RETRY)
    builder.add_edge(START, "outer")
    result = builder.compile(checkpointer=saver).invoke(
        {"log": ["as-node"]}, {"configurable": {"thread_id": thread}}, durability="sync"
    )
    assert failed == [1]
    assert result["log"][-1] == "checked"
    assert len(scenario.acted) == 1
    assert events_of(db_dsn, thread) == ["as-node"]


async def test_an_async_retried_node_s_subgraphs_act_once(db_dsn: str) -> None:
    scenario = Scenario(subgraphs=2, failures=1, nested=True)
    thread = f"retries-{uuid.uuid4()}"
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        graph = scenario.graph(saver, use_async=True)
        await graph.ainvoke({"log": []}, {"configurable": {"thread_id": thread}})
    assert scenario.attempts == 2
    assert len(scenario.acted) == 2
    assert events_of(db_dsn, thread) == ["sub0", "sub1"]


def test_a_later_execution_of_the_task_keeps_its_own_subgraph_numbers(
    saver: DurablePostgresSaver,
) -> None:
    """After a retry, the task is interrupted and resumed in the same process: the resume
    is a new execution under the same task id, and what the retried attempt's numbers
    were put back to must not rename the new execution's subgraphs (its second call got
    the first's key and never acted). Under "exit": under "sync" and "async" LangGraph
    itself (1.2) resumes the second subgraph from the checkpoints the retried attempt's
    first subgraph left under the same number, and never runs it."""
    mode: Durability = "exit"
    acted: list[str] = []

    @effect(name="retries.charge")
    def charge(what: str) -> str:
        acted.append(what)
        return f"charged for {what}"

    def work(state: State) -> State:
        return {"log": [charge(state["log"][-1])]}

    sub = one_node_graph("work", work)
    attempts: list[int] = []

    def outer(state: State) -> State:
        attempts.append(1)
        log = sub.invoke({"log": ["deposit"]})["log"][-1:]
        if len(attempts) == 1:
            raise RuntimeError("transient")
        interrupt("charge the balance too?")
        return {"log": log + sub.invoke({"log": ["balance"]})["log"][-1:]}

    builder = StateGraph(State)
    builder.add_node("outer", outer, retry_policy=RETRY)
    builder.add_edge(START, "outer")
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": f"retries-{uuid.uuid4()}"}}
    graph.invoke({"log": []}, config, durability=mode)
    result = graph.invoke(Command(resume="yes"), config, durability=mode)
    assert result["log"][-2:] == ["charged for deposit", "charged for balance"]
    assert acted == ["deposit", "balance"]
