"""The saver on Postgres answers like LangGraph's InMemorySaver, for any sequence of calls.

A hypothesis state machine sends the same random `put`, `put_writes`, `get_tuple`,
`list` and `delete_thread` calls to `DurablePostgresSaver` and to `InMemorySaver` (the
model) and compares every answer. Thread ids, namespaces, task ids, channel names,
metadata and values are random unicode, including quotes, SQL and emoji (NUL is rejected
by design and has its own properties in `test_hostile_input_properties.py`). Each example
works on threads of its own, in one database shared by the examples.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _props import HOSTILE_TEXT, examples, keeps_float, timeout
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurablePostgresSaver

pytestmark = [pytest.mark.properties, timeout()]

# Values a node can put in state: JSON-like, any unicode, no NaN (NaN != NaN).
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(keeps_float)
    | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3),
    max_leaves=6,
)
# Metadata is JSONB: a float beyond 2**53 comes back as the integer its decimal text names,
# which differs from the float (see test_a_huge_float_in_metadata_comes_back_unchanged).
METADATA_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(-(2.0**53), 2.0**53, allow_nan=False)
    | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3),
    max_leaves=6,
)
# No None: InMemorySaver matches {"k": None} on a checkpoint without "k"; JSONB containment
# (ours and upstream PostgresSaver) does not.
SCALARS = st.booleans() | st.integers(-1000, 1000) | HOSTILE_TEXT
CHANNELS = st.sampled_from(["messages", "count", "q'\"; DROP", "ünï", "🙂"])
NAMESPACES = st.sampled_from(["", "", "sub:1", "child|grand:ü"]) | HOSTILE_TEXT


def normal(found: CheckpointTuple | None) -> Any:
    """What both savers must agree on in a tuple."""
    if found is None:
        return None
    checkpoint = found.checkpoint
    return {
        "config": found.config["configurable"],
        "parent": None if found.parent_config is None else found.parent_config["configurable"],
        "id": checkpoint["id"],
        "values": checkpoint["channel_values"],
        "versions": checkpoint["channel_versions"],
        "seen": checkpoint["versions_seen"],
        "metadata": found.metadata,
        "writes": sorted(found.pending_writes or [], key=repr),
    }


def agree(call: str, ours: Any, model: Any) -> None:
    assert ours == model, f"{call}: Postgres said\n{ours!r}\nInMemorySaver said\n{model!r}"


class SaverMachine(RuleBasedStateMachine):
    saver: BaseCheckpointSaver[Any]

    def __init__(self) -> None:
        super().__init__()
        self.model = InMemorySaver()
        self.prefix = uuid.uuid4().hex[:8]
        self.threads: list[str] = []
        self.checkpoints: list[tuple[str, str, str]] = []  # (thread, ns, checkpoint id)
        self.channels: dict[tuple[str, str], dict[str, int]] = {}  # versions per thread/ns
        self.version = 0

    def both(self, call: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        ours = getattr(self.saver, call)(*args, **kwargs)
        model = getattr(self.model, call)(*copy.deepcopy(args), **copy.deepcopy(kwargs))
        return ours, model

    @rule(suffix=HOSTILE_TEXT)
    def new_thread(self, suffix: str) -> None:
        self.threads.append(f"{self.prefix}:{suffix}")

    @precondition(lambda self: self.threads)
    @rule(
        data=st.data(),
        ns=NAMESPACES,
        changes=st.dictionaries(CHANNELS, VALUES, max_size=3),
        metadata=st.dictionaries(HOSTILE_TEXT, METADATA_VALUES, max_size=3),
        on_latest=st.booleans(),
    )
    def put(
        self,
        data: st.DataObject,
        ns: str,
        changes: dict[str, Any],
        metadata: dict[str, Any],
        on_latest: bool,
    ) -> None:
        thread = data.draw(st.sampled_from(self.threads), label="thread")
        versions = self.channels.setdefault((thread, ns), {})
        latest = self.model.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ns}})
        checkpoint = empty_checkpoint()
        if latest is not None:
            checkpoint["channel_values"] = dict(latest.checkpoint["channel_values"])
        new_versions: ChannelVersions = {}
        for channel, value in changes.items():
            self.version += 1
            versions[channel] = self.version
            new_versions[channel] = self.version
            checkpoint["channel_values"][channel] = value
        checkpoint["channel_versions"] = dict(versions)
        checkpoint["versions_seen"] = {"node": dict(versions)}
        configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
        if on_latest and latest is not None:
            configurable["checkpoint_id"] = latest.config["configurable"]["checkpoint_id"]
        metadata = {**metadata, "example": self.prefix, "step": len(self.checkpoints)}
        ours, model = self.both(
            "put", {"configurable": configurable}, checkpoint, metadata, new_versions
        )
        agree("put", ours["configurable"], model["configurable"])
        self.checkpoints.append((thread, ns, checkpoint["id"]))

    @precondition(lambda self: self.checkpoints)
    @rule(
        data=st.data(),
        writes=st.lists(st.tuples(CHANNELS | st.just("__error__"), VALUES), max_size=3),
        task_id=HOSTILE_TEXT,
        task_path=HOSTILE_TEXT,
    )
    def put_writes(
        self, data: st.DataObject, writes: list[tuple[str, Any]], task_id: str, task_path: str
    ) -> None:
        mixed = any(c != "__error__" for c, _ in writes)
        if mixed and sum(c == "__error__" for c, _ in writes) > 1:
            # Two writes to one special channel in a call that also writes regular ones:
            # upstream's PostgresSaver keeps the first (INSERT ... DO NOTHING), which we
            # match; InMemorySaver keeps the last. LangGraph never sends such a call.
            return
        thread, ns, checkpoint_id = data.draw(st.sampled_from(self.checkpoints), label="at")
        config: RunnableConfig = {
            "configurable": {
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        self.both("put_writes", config, writes, task_id, task_path)

    @precondition(lambda self: self.threads)
    @rule(data=st.data(), ns=NAMESPACES, exact=st.booleans())
    def get_tuple(self, data: st.DataObject, ns: str, exact: bool) -> None:
        if exact and self.checkpoints:
            thread, ns, checkpoint_id = data.draw(st.sampled_from(self.checkpoints), label="at")
            configurable = {
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        else:
            thread = data.draw(st.sampled_from(self.threads), label="thread")
            configurable = {"thread_id": thread, "checkpoint_ns": ns}
        ours, model = self.both("get_tuple", {"configurable": configurable})
        agree("get_tuple", normal(ours), normal(model))

    @precondition(lambda self: self.threads)
    @rule(
        data=st.data(),
        ns=st.none() | NAMESPACES,
        limit=st.none() | st.integers(1, 4),
        use_before=st.booleans(),
        filter_on=st.sampled_from(["none", "step", "example", "random"]),
        random_filter=st.dictionaries(HOSTILE_TEXT, SCALARS, max_size=2),
    )
    def list(
        self,
        data: st.DataObject,
        ns: str | None,
        limit: int | None,
        use_before: bool,
        filter_on: str,
        random_filter: dict[str, Any],
    ) -> None:
        thread = data.draw(st.sampled_from(self.threads), label="thread")
        configurable: dict[str, Any] = {"thread_id": thread}
        if ns is not None:
            configurable["checkpoint_ns"] = ns
        filter_: dict[str, Any] | None = None
        if filter_on == "step" and self.checkpoints:
            filter_ = {"step": data.draw(st.integers(0, len(self.checkpoints)), label="step")}
        elif filter_on == "example":
            filter_ = {"example": self.prefix}
        elif filter_on == "random":
            filter_ = random_filter
        before = None
        if use_before and self.checkpoints:
            _, _, before_id = data.draw(st.sampled_from(self.checkpoints), label="before")
            before = {"configurable": {"checkpoint_id": before_id}}
        if ns is None:
            limit = None  # the order across namespaces is not part of the contract
        ours, model = self.both(
            "list", {"configurable": configurable}, filter=filter_, before=before, limit=limit
        )
        ours_n, model_n = [normal(t) for t in ours], [normal(t) for t in model]
        if ns is None:
            ours_n, model_n = sorted(ours_n, key=repr), sorted(model_n, key=repr)
        agree("list", ours_n, model_n)

    @precondition(lambda self: self.threads)
    @rule(data=st.data())
    def delete_thread(self, data: st.DataObject) -> None:
        thread = data.draw(st.sampled_from(self.threads), label="thread")
        self.both("delete_thread", thread)
        self.checkpoints = [c for c in self.checkpoints if c[0] != thread]
        self.channels = {k: v for k, v in self.channels.items() if k[0] != thread}


@pytest.fixture(scope="module")
def saver(db_dsn: str) -> Iterator[DurablePostgresSaver]:
    with DurablePostgresSaver.from_conn_string(db_dsn) as found:
        found.setup()
        yield found


def test_the_saver_answers_like_the_in_memory_saver(saver: DurablePostgresSaver) -> None:
    machine = type("Machine", (SaverMachine,), {"saver": saver})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples(30),
            stateful_step_count=25,
        ),
    )


# Found by the machine above: two writes to one special channel in one call were one
# multi-row upsert touching a row twice, a raw CardinalityViolation; upstream keeps the last.
def test_two_special_writes_in_one_call_keep_the_last(saver: DurablePostgresSaver) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": f"special-{uuid.uuid4()}"}}
    stored = saver.put(config, empty_checkpoint(), {}, {})
    saver.put_writes(stored, [("__error__", "first"), ("__error__", "second")], "task-1")
    found = saver.get_tuple(stored)
    assert found is not None
    assert found.pending_writes == [("task-1", "__error__", "second")]


# Found by the machine above, and the same in upstream's PostgresSaver: metadata is JSONB,
# whose numbers print without a float's binary rounding, so a float beyond 2**53 comes back
# as the (different) integer its decimal text names. InMemorySaver keeps the float.
@pytest.mark.xfail(
    strict=True, reason="JSONB metadata turns floats beyond 2**53 into other integers"
)
def test_a_huge_float_in_metadata_comes_back_unchanged(saver: DurablePostgresSaver) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": f"float-{uuid.uuid4()}"}}
    stored = saver.put(config, empty_checkpoint(), {"x": 3.188431519896601e16}, {})
    found = saver.get_tuple(stored)
    assert found is not None
    assert found.metadata["x"] == 3.188431519896601e16
