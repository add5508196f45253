"""LangGraph's private names we rely on (`langgraph_durable/_langgraph.py`), checked live.

Each test runs real LangGraph code (an in-memory checkpointer, no database) and fails
loudly when an upgrade renames or reshapes one of them: that is the signal to audit
`_langgraph.py`, the only module that spells them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.abc
import operator
import re
import sys
from importlib import metadata
from typing import Annotated, Any

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.checkpoint.serde.types import TASKS
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_durable import _langgraph


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: Any


def test_the_installed_versions_are_the_audited_line() -> None:
    for package, checked in _langgraph.CHECKED_AGAINST.items():
        installed = metadata.version(package)
        assert installed.split(".")[:2] == checked.split(".")[:2], (
            f"{package} {installed} is installed; _langgraph.py was audited against "
            f"{checked}: audit it, then update CHECKED_AGAINST"
        )


def test_a_running_node_sees_every_config_key_we_read() -> None:
    seen: dict[str, Any] = {}

    def node(state: State) -> dict[str, Any]:
        config = get_config()
        seen["durability"] = _langgraph.durability_of(config)
        seen["in_loop"] = _langgraph.in_running_loop(config)
        seen["checkpointer"] = _langgraph.checkpointer_of(config)
        seen["task_id"] = _langgraph.task_id_of(config)
        seen["scratchpad"] = _langgraph.scratchpad_of(config)
        seen["missing"] = _langgraph.missing_state_keys(config, ["log", "answer", "nope"])
        return {"log": ["node"]}

    saver = InMemorySaver()
    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"log": []}, {"configurable": {"thread_id": "t"}}, durability="exit")
    assert seen["durability"] == "exit"
    assert seen["in_loop"] is True
    assert seen["checkpointer"] is saver
    assert isinstance(seen["task_id"], str)
    assert seen["task_id"]
    assert hasattr(seen["scratchpad"], "resume")
    assert seen["missing"] == ["nope"]


def test_a_subgraph_reads_its_checkpoint_with_the_parent_task_s_place() -> None:
    """`subgraph_entry`: a subgraph's loop calls `get_tuple` on entry with the config of the
    parent task that runs it, whose metadata still says where that task ran; its own
    tasks' namespaces start with the namespace it read under."""
    entered: list[Any] = []
    inner_namespaces: list[str] = []

    class Spy(InMemorySaver):
        def get_tuple(self, config: RunnableConfig) -> Any:
            entry = _langgraph.subgraph_entry(config)
            if entry is not None:
                entered.append(entry)
            return super().get_tuple(config)

    class Inner(TypedDict, total=False):
        log: Annotated[list[str], operator.add]

    def inner(state: Inner, config: RunnableConfig) -> dict[str, Any]:
        inner_namespaces.append(config["configurable"]["checkpoint_ns"])
        return {"log": ["x"]}

    sub_builder = StateGraph(Inner)
    sub_builder.add_node("inner", inner)
    sub_builder.add_edge(START, "inner")
    sub_builder.add_edge("inner", END)
    builder = StateGraph(Inner)
    builder.add_node("mailer", sub_builder.compile())
    builder.add_conditional_edges(START, lambda s: [Send("mailer", {}), Send("mailer", {})])
    builder.add_edge("mailer", END)
    builder.compile(checkpointer=Spy()).invoke({"log": []}, {"configurable": {"thread_id": "t"}})
    assert all(e.scratchpad is not None and e.counter is not None for e in entered)
    assert sorted((e.thread_id, e.level, e.origin) for e in entered) == [
        ("t", 0, ("mailer", 1, ("__pregel_push", 0, False))),
        ("t", 0, ("mailer", 1, ("__pregel_push", 1, False))),
    ]
    assert sorted(ns.split("|")[0] for ns in inner_namespaces) == sorted(
        e.parent_namespace for e in entered
    )


def test_durability_defaults_to_async_and_update_state_is_not_a_running_loop() -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    assert _langgraph.durability_of(config) == "async"
    assert _langgraph.in_running_loop(config) is False
    assert _langgraph.missing_state_keys(config, ["x"]) is None  # no task reader here


def answered_plainly(ask: Any) -> tuple[Any, RunnableConfig]:
    """A graph of the one node `ask`, started, its first question answered by a plain
    resume ("yes")."""
    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": []}, config)
    graph.invoke(Command(resume="yes"), config)
    return graph, config


def test_answers_of_a_task_follow_resumes() -> None:
    seen: list[Any] = []

    def ask(state: State) -> dict[str, Any]:
        config = get_config()
        at_start = _langgraph.answers_of_task(config)
        first = interrupt("first?")
        asked_one = _langgraph.interrupts_asked(config)
        second = interrupt("second?")
        seen.append((at_start, asked_one, _langgraph.interrupts_asked(config)))
        return {"answer": f"{first} {second}"}

    graph, config = answered_plainly(ask)
    assert seen == []  # the second question waits; its task saved the answer "yes"
    # LangGraph keeps the plain resume until the step ends and hands it to the next
    # unanswered question: approval_node relies on seeing this (drop_plain_resume).
    graph.invoke(None, config)
    ((at_start, asked_one, asked_two),) = seen
    assert (asked_one, asked_two) == (1, 2)
    assert list(at_start.answers) == ["yes", "yes"]  # the live list, the second appended
    assert at_start.held == 1
    assert at_start.plain == "yes"

    seen.clear()
    config = {"configurable": {"thread_id": "t2"}}
    graph.invoke({"log": []}, config)
    (first,) = graph.get_state(config).interrupts
    graph.invoke(Command(resume={first.id: "one"}), config)
    (second,) = graph.get_state(config).interrupts
    assert second.id != first.id
    graph.invoke(Command(resume={second.id: "two"}), config)
    ((at_start, _, _),) = seen
    assert list(at_start.answers) == ["one", "two"]
    assert at_start.held == 1  # "two" came by id in this execution, "one" was saved
    assert at_start.plain is None


def test_a_dropped_plain_resume_answers_nothing() -> None:
    seen: list[Any] = []

    def ask(state: State) -> dict[str, Any]:
        config = get_config()
        task = _langgraph.answers_of_task(config)
        assert task is not None
        if task.plain is not None and task.plain in task.answers[: task.held]:
            _langgraph.drop_plain_resume(config)  # the one that answered the first question
        answers = [interrupt("first?"), interrupt("second?")]
        seen.append(answers)
        return {"answer": " ".join(answers)}

    graph, config = answered_plainly(ask)
    graph.invoke(None, config)
    assert seen == []
    assert graph.get_state(config).next == ("ask",)
    graph.invoke(Command(resume="no"), config)
    assert seen == [["yes", "no"]]


def test_edges_into_a_node_can_be_rerouted_before_compile() -> None:
    builder = StateGraph(State)
    for name in ("a", "b", "c", "target", "via"):
        builder.add_node(name, lambda s: {})
    builder.add_edge(START, "a")
    builder.add_edge("a", "target")
    builder.add_edge(["b", "c"], "target")
    builder.add_conditional_edges("a", lambda s: "x", {"x": "target", "y": END})
    _langgraph.reroute_edges_into(builder, "target", "via")
    assert ("a", "via") in builder.edges
    assert not [e for e in builder.edges if e[1] == "target"]
    assert [e[1] for e in builder.waiting_edges] == ["via"]
    (spec,) = builder.branches["a"].values()
    assert spec.ends == {"x": "via", "y": END}


def test_delta_snapshots_and_error_markers_keep_their_names() -> None:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    assert _langgraph.is_delta_snapshot(_DeltaSnapshot([1]))
    assert not _langgraph.is_delta_snapshot({"value": 1})
    assert _langgraph.ERROR_SOURCE_NODE == "__error_source_node__"


@pytest.mark.parametrize("statement", ["pending_interrupts", "pending_interrupts_thread"])
def test_a_finished_task_is_told_by_the_control_channels_langgraph_uses(statement: str) -> None:
    """The listing of waiting questions skips a task with any write outside these
    channels, as LangGraph's own task status does."""
    from langgraph.pregel._task_status import CONTROL_WRITES

    from langgraph_durable._sql import QUERIES

    assert _langgraph.CONTROL_WRITES == CONTROL_WRITES
    found = re.search(r"done\.channel NOT IN \(([^)]*)\)", QUERIES[statement])
    assert found is not None
    assert set(re.findall(r"'([^']+)'", found.group(1))) == set(CONTROL_WRITES)


class _FinalCheckpoints(InMemorySaver):
    """Remembers the channel names of every checkpoint put."""

    def __init__(self) -> None:
        super().__init__()
        self.puts: list[dict[str, Any]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.puts.append(dict(checkpoint["channel_values"]))
        return super().put(config, checkpoint, metadata, new_versions)


def _final_checkpoint_under_exit(
    nodes: dict[str, Any], *, interrupt_before: list[str] | None = None
) -> dict[str, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    previous = START
    for name, fn in nodes.items():
        builder.add_node(name, fn)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    saver = _FinalCheckpoints()
    graph = builder.compile(checkpointer=saver, interrupt_before=interrupt_before)
    with contextlib.suppress(ValueError):
        graph.invoke({"log": []}, {"configurable": {"thread_id": "t"}}, durability="exit")
    (final,) = saver.puts  # exit mode: one checkpoint per run
    return final


def test_a_final_checkpoint_shows_whether_the_run_stopped_early() -> None:
    def ok(state: State) -> dict[str, Any]:
        return {"log": ["ok"]}

    def asks(state: State) -> dict[str, Any]:
        return {"answer": interrupt("?")}

    def fails(state: State) -> dict[str, Any]:
        raise ValueError("boom")

    assert not _langgraph.has_work_left(_final_checkpoint_under_exit({"a": ok, "b": ok}))
    assert _langgraph.has_work_left(_final_checkpoint_under_exit({"a": ok, "b": asks}))
    assert _langgraph.has_work_left(_final_checkpoint_under_exit({"a": ok, "b": fails}))
    assert _langgraph.has_work_left(
        _final_checkpoint_under_exit({"a": ok, "b": ok}, interrupt_before=["b"])
    )


class Fan(TypedDict):
    items: list[int]
    log: Annotated[list[str], operator.add]


def test_a_finished_map_reduce_run_reads_as_finished_though_its_tasks_channel_stays() -> None:
    def fan_out(state: Fan) -> list[Send]:
        return [Send("work", {"items": [i], "log": []}) for i in state["items"]]

    def work(state: Fan) -> dict[str, Any]:
        return {"log": [f"did {state['items'][0]}"]}

    def asks(state: Fan) -> dict[str, Any]:
        interrupt("?")
        return work(state)

    def final_channels(node: Any) -> dict[str, Any]:
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(Fan)
        builder.add_node("work", node)
        builder.add_conditional_edges(START, fan_out, ["work"])
        builder.add_edge("work", END)
        saver = _FinalCheckpoints()
        graph = builder.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        graph.invoke({"items": [1, 2], "log": []}, config, durability="exit")
        return saver.puts[-1]

    finished = final_channels(work)
    assert finished[TASKS] == []  # LangGraph keeps the drained channel: the case fixed here
    assert not _langgraph.has_work_left(finished)
    stopped = final_channels(asks)
    assert stopped[TASKS]  # the sends that did not finish
    assert _langgraph.has_work_left(stopped)


def test_a_functional_run_that_stopped_early_keeps_its_start_trigger() -> None:
    from langgraph.func import entrypoint

    finished, stopped = _FinalCheckpoints(), _FinalCheckpoints()

    @entrypoint(checkpointer=finished)
    def done(x: int) -> int:
        return x

    @entrypoint(checkpointer=stopped)
    def asks(x: int) -> Any:
        return interrupt("?")

    done.invoke(1, {"configurable": {"thread_id": "t"}}, durability="exit")
    asks.invoke(1, {"configurable": {"thread_id": "t"}}, durability="exit")
    assert not _langgraph.has_work_left(finished.puts[-1])
    assert _langgraph.has_work_left(stopped.puts[-1])


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Asked:
    """An allow-list that answers every question the same way and keeps them."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.questions: list[object] = []

    def __contains__(self, key: object) -> bool:
        self.questions.append(key)
        return self.answer


@pytest.mark.parametrize("answer", [True, False])
def test_the_checking_builder_asks_about_each_class_beyond_langgraphs_safe_types(
    answer: bool,
) -> None:
    allow = Asked(answer)
    build = _langgraph.checking_ext_hook(allow)
    row = JsonPlusSerializer().dumps_typed([Point(1, 2), HumanMessage(content="hi", id="1")])[1]
    point, message = ormsgpack.unpackb(row, ext_hook=build, option=ormsgpack.OPT_NON_STR_KEYS)
    assert allow.questions == [(__name__, "Point")]  # never about the message: a safe type
    assert message == HumanMessage(content="hi", id="1")
    # refused: the stored fields, nothing built
    assert point == (Point(1, 2) if answer else {"x": 1, "y": 2})


CALLS: list[object] = []


def record(*args: object, **kwargs: object) -> str:
    """Stands for any callable a row could name: records that it was called."""
    CALLS.append((args, kwargs))
    return "built"


ARGS_BY_CODE = {
    EXT_CONSTRUCTOR_SINGLE_ARG: "x",
    EXT_CONSTRUCTOR_POS_ARGS: ["x"],
    EXT_CONSTRUCTOR_KW_ARGS: {"a": "x"},
    EXT_PYDANTIC_V1: {"a": "x"},
    EXT_PYDANTIC_V2: {"a": "x"},
}


class ImportsSeen(importlib.abc.MetaPathFinder):
    """Records every module the interpreter is asked to find."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        self.names.append(fullname)


@pytest.mark.parametrize("code", list(ARGS_BY_CODE))
@pytest.mark.parametrize("answer", [True, False])
def test_every_constructor_code_asks_before_it_imports_or_calls(code: int, answer: bool) -> None:
    """The builder's question is the only check on a custom value that holds no other
    (`serde.holds_no_other`): every constructor code must ask it first."""
    build = _langgraph.checking_ext_hook(allow := Asked(answer))
    called = ormsgpack.packb(
        ormsgpack.Ext(code, ormsgpack.packb([__name__, "record", ARGS_BY_CODE[code]]))
    )
    CALLS.clear()
    result = ormsgpack.unpackb(called, ext_hook=build, option=ormsgpack.OPT_NON_STR_KEYS)
    assert allow.questions == [(__name__, "record")]
    assert (CALLS != []) is answer
    assert (result == "built") is answer
    # a module nobody imported: refused, it is not even looked for
    seen = ImportsSeen()
    sys.meta_path.insert(0, seen)
    try:
        missing = ormsgpack.packb(
            ormsgpack.Ext(code, ormsgpack.packb(["lgd_no_such_module", "Name", ARGS_BY_CODE[code]]))
        )
        ormsgpack.unpackb(missing, ext_hook=_langgraph.checking_ext_hook(Asked(False)))
    finally:
        sys.meta_path.remove(seen)
    assert "lgd_no_such_module" not in seen.names


def test_strict_mode_is_read_where_langgraphs_serializer_reads_it() -> None:
    """`strict_msgpack()` agrees with what a default `JsonPlusSerializer()` was made as, and
    `builds_only_listed` tells the three kinds of allow-list apart by the private
    attribute it reads. (The variable itself is set in a new process by
    `tests/integration/test_strict_msgpack_env.py`: LangGraph reads it on import.)"""
    assert _langgraph.builds_only_listed(JsonPlusSerializer()) is _langgraph.strict_msgpack()
    assert not _langgraph.builds_only_listed(JsonPlusSerializer(allowed_msgpack_modules=True))
    assert _langgraph.builds_only_listed(JsonPlusSerializer(allowed_msgpack_modules=None))
    assert _langgraph.builds_only_listed(JsonPlusSerializer(allowed_msgpack_modules=[Point]))
