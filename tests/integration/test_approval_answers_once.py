"""Each answer to an approval is judged once, on a real database: when the approval node
runs again without a new answer (another branch answered, `invoke(None)`, a retry), the
answers it refused stay refused even if the hooks would now let them through."""

from __future__ import annotations

import operator
import threading
import uuid
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    NotWaitingError,
    ThreadBusyError,
)
from langgraph_durable.approvals import (
    ApprovalDecision,
    approval_node,
    aresume_approval,
    pending_approvals,
    resume_approval,
)


class Order(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    approval: dict[str, Any]
    approval_outcome: str
    discount_approval: dict[str, Any]
    discount_outcome: str
    reason: str


class Managers:
    """Who may approve: changed by the tests while a question waits."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def __call__(self, state: Any, decision: ApprovalDecision) -> bool | str:
        return decision.approver in self.names or "not a manager"


def refund_graph(saver: DurablePostgresSaver, managers: Managers) -> Any:
    builder = StateGraph(Order)
    builder.add_node(
        "approve",
        approval_node(request=lambda s: {"refund": 420}, on_approve="refund", authorize=managers),
        destinations=("refund", END),
    )
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    return builder.compile(checkpointer=saver)


def new_thread() -> tuple[str, Any]:
    thread = f"once-{uuid.uuid4()}"
    return thread, {"configurable": {"thread_id": thread}}


def waiting_for_approval(saver: DurablePostgresSaver) -> tuple[Managers, Any, str, Any]:
    """A refund graph where only bob may approve, waiting on a new thread."""
    managers = Managers("bob")
    graph = refund_graph(saver, managers)
    thread, config = new_thread()
    graph.invoke({"log": []}, config)
    return managers, graph, thread, config


def question_of(graph: Any, config: Any) -> Any:
    (asked,) = graph.get_state(config).interrupts
    return asked


def test_a_refused_answer_sent_plainly_stays_refused_when_the_node_runs_again(
    saver: DurablePostgresSaver,
) -> None:
    managers, graph, thread, config = waiting_for_approval(saver)
    # Sent straight through LangGraph, without an interrupt id: LangGraph keeps it as the
    # step's plain resume and would hand it to the question asked next as well.
    graph.invoke(Command(resume={"approved": True, "approver": "eve"}), config)
    refused = question_of(graph, config)
    assert refused.value["refused"] == "eve: not a manager; a new approval is needed"
    managers.names.add("eve")  # eve may approve from now on, but she was refused
    graph.invoke(None, config)
    state = graph.get_state(config)
    assert state.next == ("approve",)
    assert "refund" not in state.values["log"]
    (still,) = state.interrupts
    assert still.id == refused.id
    assert still.value["refused"] == "eve: refused when it came; a new approval is needed"
    done = resume_approval(graph, thread, {"approved": True, "approver": "eve"})
    assert done["log"] == ["refund"]
    assert done["approval"]["approver"] == "eve"


def test_a_refused_answer_sent_by_id_stays_refused_when_the_node_runs_again(
    saver: DurablePostgresSaver,
) -> None:
    managers, graph, thread, config = waiting_for_approval(saver)
    first = question_of(graph, config)
    graph.invoke(Command(resume={first.id: {"approved": True, "approver": "eve"}}), config)
    refused = question_of(graph, config)
    managers.names.add("eve")
    graph.invoke(None, config)
    assert question_of(graph, config).id == refused.id
    assert "refund" not in graph.get_state(config).values["log"]
    # Her same answer again, now judged: resume_approval sends it by id, as a plain one
    # equal to the refused answer is taken for LangGraph handing the old one out again.
    done = resume_approval(graph, thread, {"approved": True, "approver": "eve"})
    assert done["log"] == ["refund"]


def test_answering_a_parallel_approval_does_not_judge_the_other_again(
    saver: DurablePostgresSaver,
) -> None:
    managers = Managers("bob")
    builder = StateGraph(Order)
    builder.add_node(
        "approve_refund",
        approval_node(request=lambda s: {"refund": 420}, on_approve="refund", authorize=managers),
        destinations=("refund", END),
    )
    builder.add_node(
        "approve_discount",
        approval_node(
            request=lambda s: {"discount": 10},
            on_approve="discount",
            authorize=managers,
            decision_key="discount_approval",
            outcome_key="discount_outcome",
        ),
        destinations=("discount", END),
    )
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_node("discount", lambda s: {"log": ["discount"]})
    builder.add_edge(START, "approve_refund")
    builder.add_edge(START, "approve_discount")
    builder.add_edge("refund", END)
    builder.add_edge("discount", END)
    graph = builder.compile(checkpointer=saver)
    thread, config = new_thread()
    graph.invoke({"log": []}, config)

    def waiting(kind: str) -> Any:
        (found,) = [
            p for p in pending_approvals(saver, thread_id=thread) if kind in p.value["request"]
        ]
        return found

    eve = {"approved": True, "approver": "eve"}
    resume_approval(graph, thread, eve, interrupt_id=waiting("discount").interrupt_id)
    assert "eve: not a manager" in waiting("discount").value["refused"]
    managers.names.add("eve")
    bob = {"approved": True, "approver": "bob"}
    resume_approval(graph, thread, bob, interrupt_id=waiting("refund").interrupt_id)
    # The refund's approval is done, the discount's still waits: eve's old answer was not
    # taken for it (the step ends, and the refund runs, when both are answered).
    assert graph.get_state(config).next == ("approve_discount",)
    assert waiting("discount").value["refused"].startswith("eve: refused when it came")
    done = resume_approval(graph, thread, bob)
    assert sorted(done["log"]) == ["discount", "refund"]
    assert done["discount_approval"]["approver"] == "bob"


def test_a_node_that_asks_something_first_judges_the_approval_answers(
    saver: DurablePostgresSaver,
) -> None:
    managers = Managers("bob")
    approve = approval_node(
        request=lambda s: {"refund": 420}, on_approve="refund", authorize=managers
    )

    def ask_why_then_approve(state: Order) -> Any:
        reason = interrupt({"question": "why refund?"})
        command = approve(state)
        return Command(goto=command.goto, update={**command.update, "reason": reason})

    builder = StateGraph(Order)
    builder.add_node("gate", ask_why_then_approve, destinations=("refund", END))
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_edge(START, "gate")
    builder.add_edge("refund", END)
    graph = builder.compile(checkpointer=saver)
    thread, config = new_thread()
    graph.invoke({"log": []}, config)
    graph.invoke(Command(resume="damaged"), config)
    resume_approval(graph, thread, {"approved": True, "approver": "eve"})
    assert "eve: not a manager" in question_of(graph, config).value["refused"]
    done = resume_approval(graph, thread, {"approved": True, "approver": "bob"})
    assert done["log"] == ["refund"]
    assert (done["reason"], done["approval"]["approver"]) == ("damaged", "bob")


def test_an_answer_whose_judging_failed_is_judged_on_the_retry(
    saver: DurablePostgresSaver,
) -> None:
    failures = [ConnectionError("directory unreachable")]

    def flaky_managers(state: Any, decision: ApprovalDecision) -> bool:
        if failures:
            raise failures.pop()
        return decision.approver == "bob"

    builder = StateGraph(Order)
    builder.add_node(
        "approve",
        approval_node(
            request=lambda s: {"refund": 420}, on_approve="refund", authorize=flaky_managers
        ),
        destinations=("refund", END),
        retry_policy=RetryPolicy(initial_interval=0.0, jitter=False),
    )
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    graph = builder.compile(checkpointer=saver)
    _, config = new_thread()
    graph.invoke({"log": []}, config)
    done = graph.invoke(Command(resume={"approved": True, "approver": "bob"}), config)
    assert failures == []
    assert done["log"] == ["refund"]
    assert done["approval"]["approver"] == "bob"


async def test_the_async_saver_keeps_a_refusal_too(db_dsn: str) -> None:
    managers = Managers("bob")
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as asaver:
        graph = refund_graph(asaver, managers)  # type: ignore[arg-type]
        thread, config = new_thread()
        await graph.ainvoke({"log": []}, config)
        await graph.ainvoke(Command(resume={"approved": True, "approver": "eve"}), config)
        managers.names.add("eve")
        await graph.ainvoke(None, config)
        state = await graph.aget_state(config)
        assert state.next == ("approve",)
        assert "refund" not in state.values["log"]
        done = await aresume_approval(graph, thread, {"approved": True, "approver": "eve"})
        assert done["log"] == ["refund"]


def test_a_command_sent_again_does_not_deliver_its_refused_answer_twice(
    saver: DurablePostgresSaver,
) -> None:
    """A recovered run sends its stored command again when the refusal made no new
    checkpoint; LangGraph appends an answer sent under the task's first id once more."""
    managers, graph, _, config = waiting_for_approval(saver)
    command = Command(resume={question_of(graph, config).id: {"approved": True, "approver": "eve"}})
    graph.invoke(command, config)
    managers.names.add("eve")
    graph.invoke(command, config)
    state = graph.get_state(config)
    assert state.next == ("approve",)
    assert "refund" not in state.values["log"]


def test_two_people_answering_at_once_do_not_both_run_the_approved_node(
    saver: DurablePostgresSaver,
) -> None:
    """Both would see the question waiting; without the thread's lease both answers ran
    the refund (and forked the thread). The second is refused while the first runs, and
    finds nothing waiting once it is done."""
    inside, release = threading.Event(), threading.Event()
    refunds: list[str] = []

    def refund(state: Order) -> Order:
        refunds.append("refund")
        inside.set()
        assert release.wait(60)
        return {"log": ["refund"]}

    builder = StateGraph(Order)
    builder.add_node(
        "approve",
        approval_node(request=lambda s: {"refund": 420}, on_approve="refund"),
        destinations=("refund", END),
    )
    builder.add_node("refund", refund)
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    graph = builder.compile(checkpointer=saver)
    thread, config = new_thread()
    graph.invoke({"log": []}, config)

    first = threading.Thread(
        target=resume_approval, args=(graph, thread, {"approved": True, "approver": "ana"})
    )
    first.start()
    try:
        assert inside.wait(60)
        with pytest.raises(ThreadBusyError):
            resume_approval(graph, thread, {"approved": True, "approver": "bob"})
    finally:
        release.set()
        first.join(60)
    with pytest.raises(NotWaitingError):
        resume_approval(graph, thread, {"approved": True, "approver": "bob"})
    assert refunds == ["refund"]
    assert graph.get_state(config).values["log"] == ["refund"]
