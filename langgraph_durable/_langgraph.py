"""Every private name of LangGraph this package relies on, in one place.

Checked against langgraph 1.2.24 and langgraph-checkpoint 4.3.2 (`CHECKED_AGAINST`). On an
upgrade, audit this module and nothing else: `tests/unit/test_langgraph_internals.py`
runs a real graph and fails loudly when one of these names or shapes has changed. Public
LangGraph API (`langgraph.checkpoint.base`, `langgraph.types`, `langgraph.config`) is used
directly elsewhere; only what LangGraph does not promise lives here.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_READ,
    CONFIG_KEY_RESUME_MAP,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_SCRATCHPAD,
    CONFIG_KEY_TASK_ID,
    ERROR,
    ERROR_SOURCE_NODE,
    INTERRUPT,
    NS_SEP,
    RESUME,
)
from langgraph.checkpoint.serde import _msgpack as msgpack_safety
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.types import TASKS, _DeltaSnapshot
from langgraph.graph import StateGraph
from langgraph.types import _interrupt_id

from langgraph_durable._identity import FirstSeen

__all__ = [
    "CHECKED_AGAINST",
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_DURABILITY",
    "CONFIG_KEY_RUNTIME",
    "CONFIG_KEY_SCRATCHPAD",
    "CONFIG_KEY_TASK_ID",
    "CONTROL_WRITES",
    "ERROR",
    "ERROR_SOURCE_NODE",
    "MSGPACK_METHOD_CODE",
    "MSGPACK_NESTED_CODES",
    "MSGPACK_NUMPY_CODE",
    "MSGPACK_REFERENCE_CODES",
    "SAFE_MSGPACK_METHODS",
    "SAFE_MSGPACK_TYPES",
    "SubgraphEntry",
    "TaskAnswers",
    "answers_of_task",
    "as_safe_serializer",
    "builds_only_listed",
    "checking_ext_hook",
    "checkpointer_of",
    "copy_serializer",
    "drop_plain_resume",
    "durability_of",
    "has_work_left",
    "in_running_loop",
    "interrupts_asked",
    "is_delta_snapshot",
    "loads_anything",
    "missing_state_keys",
    "nodes_going_to",
    "reroute_edges_into",
    "scratchpad_of",
    "strict_ext_hook",
    "strict_msgpack",
    "subgraph_entry",
    "task_attempt_of",
    "task_checkpoint_of",
    "task_id_of",
]

CHECKED_AGAINST = {"langgraph": "1.2.24", "langgraph-checkpoint": "4.3.2"}

# The write channels that say what happened to a task rather than what it produced: a
# task with a write to any other channel has finished, and its question is answered
# (LangGraph's `read_task_statuses`). `pending_interrupts` in queries.sql spells them out.
CONTROL_WRITES = frozenset({ERROR, ERROR_SOURCE_NODE, INTERRUPT, RESUME})


def _configurable(config: RunnableConfig | None) -> Mapping[str, Any]:
    return (config or {}).get("configurable") or {}


def durability_of(config: RunnableConfig) -> str:
    """The durability mode LangGraph runs this call under ("async" when unset).

    LangGraph carries `invoke(durability=...)` in the config under a private key; a mode
    bound with `with_durability()` is put there too, so subgraphs inherit it.
    """
    return str(_configurable(config).get(CONFIG_KEY_DURABILITY) or "async")


_START_CHANNEL = "__start__"
_TRIGGER_PREFIX = "branch:to:"


def has_work_left(channel_values: Mapping[str, Any]) -> bool:
    """Whether a checkpoint holds a trigger for a next task: the graph stopped before its end.

    A `StateGraph` triggers a node through its `branch:to:<node>` channel, the functional
    API and every graph's first step through `__start__`, and a `Send` through the tasks
    channel; each keeps a value in the checkpoint only until the task it triggers has run.
    Under `durability="exit"` the final checkpoint of a run that ended at an interrupt or an
    error holds one, and only such a run sends pending writes after that checkpoint. A
    graph built on other channel names reads as finished (the saver then stores those
    writes after the checkpoint, as upstream does). The tasks channel stays in every later
    checkpoint of a run that sent once, as an empty list after its sends ran: only sends
    still in it are work left.
    """
    return any(
        (name == TASKS and bool(value))
        or name == _START_CHANNEL
        or name.startswith(_TRIGGER_PREFIX)
        for name, value in channel_values.items()
    )


def in_running_loop(config: RunnableConfig) -> bool:
    """Whether a saver call comes from a running graph loop (not from `update_state`)."""
    return CONFIG_KEY_RUNTIME in _configurable(config)


def is_delta_snapshot(value: object) -> bool:
    """A `DeltaChannel` snapshot marker among a checkpoint's channel values."""
    return isinstance(value, _DeltaSnapshot)


@dataclass(frozen=True)
class TaskAnswers:
    """The answers one execution of a task holds for its `interrupt()` calls.

    Attributes:
        answers: The live list LangGraph matches answers to `interrupt()` calls with, by
            order; an answer taken from a plain resume is appended to it when used.
        held: How many of them the task already held from earlier executions: those were
            seen by an execution that then stopped at a later question (LangGraph saves them
            with its interrupt). An answer sent by interrupt id comes on top of them.
        plain: The pending plain resume (a `Command(resume=value)` sent without an interrupt
            id), or None.
    """

    answers: Sequence[Any]
    held: int
    plain: Any


# The number of held answers is taken the first time an execution's answer list is seen:
# LangGraph's in-process retries share the list, with answers used by the failed attempt.
_HELD: FirstSeen[int] = FirstSeen()
_NOTHING = object()


def answers_of_task(config: RunnableConfig) -> TaskAnswers | None:
    """What this task execution holds for its `interrupt()` calls, or None outside a task.

    LangGraph builds the list from the task's saved answers, then appends the answer sent
    for the next question by interrupt id: the very object of the resume map, which tells
    it from the saved ones (those are read back from the checkpointer).
    """
    configurable = _configurable(config)
    scratchpad = configurable.get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is None:
        return None
    answers: list[Any] = scratchpad.resume

    def held_now() -> int:
        # Only the answer sent under the id of the very question it fills is new: LangGraph
        # also appends one sent under the task's first id (older versions' ids), which is
        # how a recovered run's command, sent again, would deliver an old answer twice.
        sent_by_id = configurable.get(CONFIG_KEY_RESUME_MAP) or {}
        slot = _interrupt_id(str(configurable.get(CONFIG_KEY_CHECKPOINT_NS, "")), len(answers) - 1)
        newest_sent = bool(answers) and sent_by_id.get(slot, _NOTHING) is answers[-1]
        return len(answers) - 1 if newest_sent else len(answers)

    return TaskAnswers(answers, _HELD.value(answers, held_now), scratchpad.get_null_resume(False))


def drop_plain_resume(config: RunnableConfig) -> None:
    """Take the pending plain resume away from this step's tasks without using it.

    LangGraph keeps a plain resume among the checkpoint's pending writes until the step
    ends, and hands it to the next unanswered `interrupt()` of every execution: after it
    answered one question, it answers the one asked next as well.
    """
    scratchpad = _configurable(config).get(CONFIG_KEY_SCRATCHPAD)
    if scratchpad is not None:
        scratchpad.get_null_resume(True)


def interrupts_asked(config: RunnableConfig) -> int:
    """How many `interrupt()` calls this execution of the task has made so far: the index
    of the answer the next call takes.

    LangGraph counts them in the scratchpad with a lazily made `itertools.count`; its
    repr shows the next value without taking it.
    """
    scratchpad = _configurable(config).get(CONFIG_KEY_SCRATCHPAD)
    counter = getattr(getattr(scratchpad, "interrupt_counter", None), "_counter", None)
    if counter is None:
        return 0
    shown = repr(getattr(counter, "__self__", None))
    if not (shown.startswith("count(") and shown.endswith(")")):
        raise RuntimeError(f"LangGraph's interrupt counter changed shape: {shown}")
    return int(shown[len("count(") : -1])


def missing_state_keys(config: RunnableConfig, keys: Sequence[str]) -> list[str] | None:
    """Which of `keys` the running graph's state does not have, or None if unknown here.

    A node's update to a key the state does not declare is dropped without a word; reading
    an undeclared channel through the task's reader raises KeyError, which tells them apart.
    """
    read = _configurable(config).get(CONFIG_KEY_READ)
    if read is None:
        return None
    missing = []
    for key in keys:
        try:
            read([key], False)
        except KeyError:
            missing.append(key)
    return missing


def reroute_edges_into(builder: StateGraph[Any, Any, Any, Any], target: str, via: str) -> None:
    """Send every edge that leads to `target` to `via` instead, before `compile()`.

    Plain edges, edges that wait for several nodes and conditional edges with a path map;
    `StateGraph` keeps them in attributes it does not document.
    """
    for edge in [e for e in builder.edges if e[1] == target]:
        builder.edges.discard(edge)
        builder.edges.add((edge[0], via))
    for waiting in [e for e in builder.waiting_edges if e[1] == target]:
        builder.waiting_edges.discard(waiting)
        builder.waiting_edges.add((waiting[0], via))
    for branches in builder.branches.values():
        for key, spec in list(branches.items()):
            if spec.ends and target in spec.ends.values():
                ends = {k: (via if v == target else v) for k, v in spec.ends.items()}
                branches[key] = spec._replace(ends=ends)


def nodes_going_to(builder: StateGraph[Any, Any, Any, Any], target: str) -> list[str]:
    """The nodes that declare they may go to `target` by `Command(goto=...)` (their return
    annotation or `destinations=`): `StateNodeSpec.ends`, which `StateGraph` does not
    document. A node that returns such a Command without declaring it is not seen."""
    return sorted(
        name
        for name, spec in builder.nodes.items()
        if name != target and target in (getattr(spec, "ends", None) or ())
    )


def checkpointer_of(config: RunnableConfig | None) -> Any:
    """The checkpointer of the graph running this task (None outside a graph)."""
    return _configurable(config).get(CONFIG_KEY_CHECKPOINTER)


def task_id_of(config: RunnableConfig | None) -> str | None:
    found = _configurable(config).get(CONFIG_KEY_TASK_ID)
    return None if found is None else str(found)


def task_checkpoint_of(config: RunnableConfig | None) -> tuple[str, str] | None:
    """(namespace, checkpoint id) of the graph loop step this task runs in, or None.

    LangGraph gives a task `checkpoint_id=None` and records the checkpoint it runs on in
    the checkpoint map, under the loop's namespace, added last.
    """
    found = _configurable(config).get(CONFIG_KEY_CHECKPOINT_MAP)
    if not found:
        return None
    namespace, checkpoint_id = list(found.items())[-1]
    return str(namespace), str(checkpoint_id)


def task_attempt_of(config: RunnableConfig | None) -> int:
    """Which attempt of the task this is under a retry policy (1 for the first)."""
    runtime = _configurable(config).get(CONFIG_KEY_RUNTIME)
    info = getattr(runtime, "execution_info", None)
    return int(getattr(info, "node_attempt", 1) or 1)


def scratchpad_of(config: RunnableConfig | None) -> Any:
    """The task execution's scratchpad: a new object for every execution of a task."""
    return _configurable(config).get(CONFIG_KEY_SCRATCHPAD)


@dataclass(frozen=True)
class SubgraphEntry:
    """A subgraph's loop starting inside a parent task (`subgraph_entry`)."""

    thread_id: str
    parent_namespace: str
    """The parent task's namespace (with task ids)."""
    level: int
    """Which subgraph the parent task's execution starts, counted from 0 over all its
    attempts: LangGraph appends it to the subgraph's namespace (`|1`, `|2`) from the
    second one on, and its in-process retries (`RetryPolicy`) go on counting."""
    origin: tuple[str, int, Any]
    """(node, step, path) of the parent task."""
    scratchpad: Any
    """The parent task's scratchpad: one per attempt (a retry gets a copy)."""
    counter: Any
    """The subgraph counter, shared by all attempts of the parent task's execution."""


def subgraph_entry(config: RunnableConfig) -> SubgraphEntry | None:
    """The parent task's place when `config` is the one a subgraph's loop reads its
    checkpoint with as it starts, else None.

    LangGraph runs a subgraph on the config of the parent task that runs it, with the
    namespace set to that task's (`node:task_id`, then `|N` for the task's N-th subgraph
    from the second on); the loop's first checkpointer call, `get_tuple` (or
    `list(before=...)` when it replays from an earlier checkpoint), gets it with the
    parent task's metadata and scratchpad still in it. Its tasks then get metadata of
    their own, which replaces the parent's.
    """
    configurable = config.get("configurable") or {}
    namespace = configurable.get("checkpoint_ns")
    scratchpad = configurable.get(CONFIG_KEY_SCRATCHPAD)
    if not namespace or scratchpad is None or "thread_id" not in configurable:
        return None
    metadata = config.get("metadata") or {}
    parent_namespace = metadata.get("langgraph_checkpoint_ns")
    if not isinstance(parent_namespace, str) or not parent_namespace:
        return None
    if namespace == parent_namespace:
        level = 0
    else:
        head, sep, count = str(namespace).rpartition(NS_SEP)
        if not (sep and head == parent_namespace and count.isdigit()):
            return None
        level = int(count)
    node, step = metadata.get("langgraph_node"), metadata.get("langgraph_step")
    if not isinstance(node, str) or not isinstance(step, int):
        return None
    path = metadata.get("langgraph_path", ())
    return SubgraphEntry(
        thread_id=str(configurable["thread_id"]),
        parent_namespace=parent_namespace,
        level=level,
        origin=(node, step, path),
        scratchpad=scratchpad,
        counter=getattr(scratchpad, "subgraph_counter", None),
    )


# -- the msgpack format's class references (langgraph.checkpoint.serde.jsonplus) -----------
# Ext codes whose payload is [module, name, args, ...]: the loader imports `module` and
# calls `name` (for the method code, `name.method`). The delta-snapshot code nests values.
MSGPACK_REFERENCE_CODES = frozenset(
    {
        jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG,
        jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
        jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
        jsonplus.EXT_METHOD_SINGLE_ARG,
        jsonplus.EXT_PYDANTIC_V1,
        jsonplus.EXT_PYDANTIC_V2,
    }
)
MSGPACK_METHOD_CODE = jsonplus.EXT_METHOD_SINGLE_ARG
MSGPACK_NUMPY_CODE = jsonplus.EXT_NUMPY_ARRAY  # built by `import numpy` in LangGraph's builder
MSGPACK_NESTED_CODES = frozenset({jsonplus.EXT_DELTA_SNAPSHOT})

S = TypeVar("S", bound=jsonplus.JsonPlusSerializer)


def copy_serializer(serde: S) -> S:
    """A shallow copy: JsonPlusSerializer keeps its settings in instance attributes."""
    return copy.copy(serde)


@functools.lru_cache(maxsize=256)
def strict_ext_hook(allowed: frozenset[tuple[str, ...]]) -> Any:
    """JsonPlusSerializer's builder of custom msgpack values (private
    `_create_msgpack_ext_hook`), allowing LangGraph's safe types and `allowed` only: it
    returns the stored fields, unbuilt, for anything else.

    Kept per allow-list: a loaded message list asks for one per message, always with the
    same few sets, and making the builder took a sixth of what checking a message costs.
    The builder holds nothing but its allow-list."""
    return jsonplus._create_msgpack_ext_hook(set(allowed))


def checking_ext_hook(allowed: Container[tuple[str, str]]) -> Any:
    """JsonPlusSerializer's builder of custom msgpack values (private
    `_create_msgpack_ext_hook`) that asks `(module, name) in allowed` for every class
    beyond LangGraph's safe types, after decoding the value's fields and before importing
    or calling anything; for a class it refuses it returns the stored fields, unbuilt. A
    method call is allowed only if LangGraph's safe methods list it. (Its signature says
    a set: it only ever tests membership.)"""
    return jsonplus._create_msgpack_ext_hook(cast(Any, allowed))


def strict_msgpack() -> bool:
    """Whether LangGraph's strict msgpack mode is on (`LANGGRAPH_STRICT_MSGPACK` set to
    1/true/yes). LangGraph reads the variable once, when `langgraph.checkpoint.serde._msgpack`
    is imported, into its private `STRICT_MSGPACK_ENABLED`; `JsonPlusSerializer()` then
    allows only its safe types and `compile()` passes the state schema's types to
    `with_allowlist`. Read when asked, as `JsonPlusSerializer` reads it when it is made."""
    return bool(msgpack_safety.STRICT_MSGPACK_ENABLED)


def builds_only_listed(serde: jsonplus.JsonPlusSerializer) -> bool:
    """Whether `serde` builds only LangGraph's safe types and those it lists: its private
    `_allowed_msgpack_modules` is not True ("build anything", the default outside strict
    mode) but None (strict mode's default) or a set (an explicit
    `allowed_msgpack_modules=[...]`)."""
    return getattr(serde, "_allowed_msgpack_modules", True) is not True


def loads_anything(serde: jsonplus.JsonPlusSerializer) -> bool:
    """Whether `serde` was made to load pickle rows or any LangChain-serialized module
    (`pickle_fallback=True`, or the private `_allowed_json_modules` set to True)."""
    return bool(serde.pickle_fallback) or getattr(serde, "_allowed_json_modules", None) is True


def as_safe_serializer(serde: jsonplus.JsonPlusSerializer, safe: type[S]) -> S:
    """`serde`'s settings under the safe subclass `safe`, its own allow-list carried over,
    and strict when `serde` builds only what it lists (`builds_only_listed`).

    Reads JsonPlusSerializer's private `_allowed_msgpack_modules` (a set, True or None).
    """
    clone: Any = copy.copy(serde)
    clone.__class__ = safe
    listed = getattr(serde, "_allowed_msgpack_modules", None)
    clone.allowed = frozenset(listed) if isinstance(listed, (set, frozenset)) else frozenset()
    clone.strict = builds_only_listed(serde)
    result: S = clone
    return result
