"""Approval nodes, resume helpers, pending approvals and both guards, on a real database."""

from __future__ import annotations

import operator
import smtplib
import uuid
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import psycopg
import pytest
from _pg import create_database, drop_database
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from pydantic import ValidationError
from typing_extensions import TypedDict

from langgraph_durable import (
    ConfigurationError,
    DurablePostgresSaver,
    GraphVersion,
    InvalidDecisionError,
    NotWaitingError,
    RunConflictError,
    RunRegistry,
    RunStatus,
    SideEffectBeforeInterruptError,
    SideEffectBeforeInterruptWarning,
    Worker,
    WrongSaverClassError,
    effect,
)
from langgraph_durable._guard import set_interrupt_guard
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals import (
    add_approval_before,
    approval_node,
    check_graph,
    pending_approvals,
    resume_approval,
)


class Refund(TypedDict, total=False):
    order_id: str
    amount: int
    log: Annotated[list[str], operator.add]
    approval: dict[str, Any]
    approval_outcome: str


WORLD: dict[str, Any] = {}

SEND_EMAIL_LINE = next(
    n
    for n, line in enumerate(Path(__file__).read_text().splitlines(), 1)
    if line.strip().endswith("(SEND_EMAIL)")
)


def refund_graph(saver: DurablePostgresSaver) -> Any:
    def limit(state: Refund, decision: Any) -> bool | str:
        if decision.approver.startswith("manager") or state["amount"] <= 100:
            return True
        return f"may not approve {state['amount']}"

    def still_refundable(state: Refund, decision: Any) -> Any:
        status = WORLD.get(state["order_id"], "open")
        if status == "refunded":
            return "no_longer_needed"
        if status == "changed":
            WORLD[state["order_id"]] = "open"
            return "needs_new_approval"
        return "proceed"

    builder = StateGraph(Refund)
    builder.add_node("check", lambda s: {"log": ["check"]})
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_node("rejected", lambda s: {"log": ["rejected"]})
    builder.add_edge(START, "check")
    builder.add_edge("check", "refund")
    builder.add_edge("refund", END)
    builder.add_edge("rejected", END)
    name = add_approval_before(
        builder,
        "refund",
        request=lambda s: {"order": s["order_id"], "amount": s["amount"]},
        on_reject="rejected",
        authorize=limit,
        revalidate=still_refundable,
    )
    assert name == "approve_refund"
    return builder.compile(checkpointer=saver)


def start(graph: Any, amount: int = 420) -> tuple[str, Any]:
    thread = f"refund-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    result = graph.invoke({"order_id": thread, "amount": amount, "log": []}, config)
    return thread, result


def test_approve_runs_the_guarded_node(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    thread, waiting = start(graph)
    payload = waiting["__interrupt__"][0].value
    assert payload["request"] == {"order": thread, "amount": 420}
    done = resume_approval(graph, thread, {"approved": True, "approver": "manager-ana"})
    assert done["log"] == ["check", "refund"]
    assert done["approval_outcome"] == "approved"
    assert done["approval"]["approver"] == "manager-ana"


def test_a_question_a_registry_run_asked_is_answered_through_the_run(
    saver: DurablePostgresSaver,
) -> None:
    """resume_approval ran the graph in the caller's process on a thread whose registry
    run waited at the question: the thread finished while the run stayed `interrupted`
    for good, and could no longer be resumed."""
    graph = refund_graph(saver)
    version = GraphVersion(f"refund-{uuid.uuid4().hex[:8]}", "1", graph)
    runs = RunRegistry(saver)
    run = runs.create(version, {"order_id": "o-1", "amount": 420, "log": []})
    worker = Worker(saver, [version])
    worker.run_until_idle()
    decision = {"approved": True, "approver": "manager-ana"}
    with pytest.raises(RunConflictError, match=f"belongs to run {run.run_id}"):
        resume_approval(graph, run.thread_id, decision)
    # A newer run of the thread, cancelled before it ran, does not hide the one that asked.
    newer = runs.create(version, {"log": []}, thread_id=run.thread_id)
    with pytest.raises(RunConflictError, match=f"belongs to run {newer.run_id}"):
        resume_approval(graph, run.thread_id, decision)  # on its way: it holds the thread
    runs.cancel(newer.run_id)
    with pytest.raises(RunConflictError, match=f"belongs to run {run.run_id}"):
        resume_approval(graph, run.thread_id, decision)
    assert runs.get(run.run_id).status is RunStatus.INTERRUPTED
    assert len(pending_approvals(saver, thread_id=run.thread_id)) == 1  # nothing was sent
    (asked,) = pending_approvals(saver, thread_id=run.thread_id)
    runs.resume(run.run_id, Command(resume=decision), question=asked.interrupt_id)
    (done,) = worker.run_until_idle()
    assert done.status is RunStatus.SUCCESS
    assert runs.output_of(done)["log"] == ["check", "refund"]


def test_reject_routes_away(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    thread, _ = start(graph)
    done = resume_approval(graph, thread, {"approved": False, "approver": "manager-ana"})
    assert done["log"] == ["check", "rejected"]


def test_invalid_decisions_change_nothing(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    thread, _ = start(graph)
    config = {"configurable": {"thread_id": thread}}
    with pytest.raises(InvalidDecisionError, match="approver"):
        resume_approval(graph, thread, {"approved": True})
    # Sent anyway, straight through LangGraph: the node refuses it by name, nothing is saved.
    with pytest.raises(InvalidDecisionError, match="approved") as raised:
        graph.invoke(Command(resume={"approved": "maybe"}), config)
    assert isinstance(raised.value.__cause__, ValidationError)
    assert graph.get_state(config).next == ("approve_refund",)
    done = resume_approval(graph, thread, {"approved": True, "approver": "manager-bo"})
    assert done["log"] == ["check", "refund"]


def test_unauthorized_approver_is_asked_again(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    thread, _ = start(graph)
    again = resume_approval(graph, thread, {"approved": True, "approver": "intern-cy"})
    refused = again["__interrupt__"][0].value["refused"]
    assert "intern-cy: may not approve 420" in refused
    done = resume_approval(graph, thread, {"approved": True, "approver": "manager-ana"})
    assert done["log"] == ["check", "refund"]
    assert done["approval"]["approver"] == "manager-ana"


def test_who_may_answer_is_asked_about_rejections_too(saver: DurablePostgresSaver) -> None:
    """One rule says who may answer, approve or reject: the console asks it before it
    sends, and the node asked it only about approvals, so anyone could reject through the
    library, the CLI or the registry."""
    graph = refund_graph(saver)
    thread, _ = start(graph)
    again = resume_approval(graph, thread, {"approved": False, "approver": "intern-cy"})
    assert "intern-cy: may not approve 420" in again["__interrupt__"][0].value["refused"]
    done = resume_approval(graph, thread, {"approved": False, "approver": "manager-ana"})
    assert done["log"] == ["check", "rejected"]


def test_a_node_that_may_go_straight_to_the_guarded_one_is_refused() -> None:
    """`Command(goto="refund")` from a node would run the refund unapproved."""

    def decide(state: Refund) -> Command[Literal["refund"]]:
        return Command(goto="refund")

    builder = StateGraph(Refund)
    builder.add_node("decide", decide)
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_edge(START, "decide")
    with pytest.raises(ConfigurationError, match="'decide' may go to 'refund'"):
        add_approval_before(builder, "refund", request=lambda s: {"amount": s["amount"]})


def test_stale_world_routes_or_reasks(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    thread, _ = start(graph)
    WORLD[thread] = "refunded"  # someone refunded by hand while it waited
    done = resume_approval(graph, thread, {"approved": True, "approver": "manager-ana"})
    assert done["approval_outcome"] == "no_longer_needed"
    assert "refund" not in done["log"]

    thread, _ = start(graph)
    WORLD[thread] = "changed"
    again = resume_approval(graph, thread, {"approved": True, "approver": "manager-ana"})
    assert "approve it again" in again["__interrupt__"][0].value["refused"]
    done = resume_approval(graph, thread, {"approved": True, "approver": "manager-ana"})
    assert done["log"] == ["check", "refund"]


def test_pending_approvals_lists_waiting_threads(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    thread, _ = start(graph, amount=77)
    waiting = [p for p in pending_approvals(saver, only_approvals=True) if p.thread_id == thread]
    assert len(waiting) == 1
    assert waiting[0].value["request"]["amount"] == 77
    assert waiting[0].age is not None
    resume_approval(graph, thread, {"approved": True, "approver": "clerk"})
    assert not [p for p in pending_approvals(saver, thread_id=thread)]
    with pytest.raises(NotWaitingError, match="finished"):
        resume_approval(graph, thread, {"approved": True, "approver": "clerk"})


class TwoQuestions(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def two_questions(saver: DurablePostgresSaver) -> Any:
    """Two parallel nodes that each ask a plain question."""

    def asker(name: str) -> Any:
        def ask(state: TwoQuestions) -> TwoQuestions:
            return {"answers": [interrupt({"who": name})]}

        return ask

    builder = StateGraph(TwoQuestions)
    for name in ("zeta", "alpha"):
        builder.add_node(name, asker(name))
        builder.add_edge(START, name)
        builder.add_edge(name, END)
    return builder.compile(checkpointer=saver)


def store_questions_against_task_order(dsn: str, thread: str) -> list[str]:
    """Store a thread's two interrupt writes again in reverse task order, so that a listing
    returning them as stored, not sorted, shows the wrong order; returns the task ids in
    task order."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        stored_again = conn.execute(
            "WITH gone AS (DELETE FROM checkpoint_writes"
            " WHERE thread_id = %s AND channel = '__interrupt__' RETURNING *)"
            " INSERT INTO checkpoint_writes SELECT * FROM gone ORDER BY task_id DESC, idx DESC"
            " RETURNING task_id",
            (thread,),
        ).fetchall()
    assert len(stored_again) == 2
    return sorted(row[0] for row in stored_again)


def test_questions_of_one_thread_come_in_task_order(
    saver: DurablePostgresSaver, db_dsn: str
) -> None:
    """Two parallel nodes ask at once: listed by task, the same way for one thread and for
    all (answering takes the first), however many times they are listed."""
    graph = two_questions(saver)
    thread = f"two-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"answers": []}, config)
    store_questions_against_task_order(db_dsn, thread)
    by_task = sorted(graph.get_state(config).tasks, key=lambda task: task.id)
    expected = [task.interrupts[0].value["who"] for task in by_task]
    for _ in range(3):
        one = [p.value["who"] for p in pending_approvals(saver, thread_id=thread)]
        # Oldest first: a high limit keeps the other tests' waiting threads from hiding it.
        listed = pending_approvals(saver, limit=10_000)
        every = [p.value["who"] for p in listed if p.thread_id == thread]
        assert one == every == expected


@pytest.mark.parametrize("statement", ["pending_interrupts", "pending_interrupts_thread"])
def test_the_listings_sort_by_task_under_any_plan(pg_server_dsn: str, statement: str) -> None:
    """Each listing sorts a thread's questions itself. With index scans off, rows come in
    the order stored (against task order here), and a sort of two tied rows keeps them in
    that order: a listing without the task in its ORDER BY fails every time. (With index
    scans, the primary key hands them over in task order, which would hide that.)"""
    name, dsn = create_database(pg_server_dsn)
    try:
        with DurablePostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            thread = "two-questions"
            two_questions(saver).invoke({"answers": []}, {"configurable": {"thread_id": thread}})
        expected = store_questions_against_task_order(dsn, thread)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET enable_indexscan = off")
            conn.execute("SET enable_indexonlyscan = off")
            rows = conn.execute(QUERIES[statement], {"thread_id": thread, "limit": 10})
            assert [row[2] for row in rows.fetchall()] == expected
    finally:
        drop_database(pg_server_dsn, name)


def test_a_question_answered_beside_another_is_no_longer_listed(
    saver: DurablePostgresSaver,
) -> None:
    """Answering one of two parallel questions finishes its task while the other asks
    again at the same checkpoint: only the other is listed, as LangGraph reports it."""
    graph = two_questions(saver)
    thread = f"two-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"answers": []}, config)
    first, second = pending_approvals(saver, thread_id=thread)
    graph.invoke(Command(resume={first.interrupt_id: "yes"}), config)
    still = [i.id for i in graph.get_state(config).interrupts]
    assert still == [second.interrupt_id]
    assert [p.interrupt_id for p in pending_approvals(saver, thread_id=thread)] == still
    listed = pending_approvals(saver, limit=10_000)
    assert [p.interrupt_id for p in listed if p.thread_id == thread] == still
    graph.invoke(Command(resume={second.interrupt_id: "no"}), config)
    assert pending_approvals(saver, thread_id=thread) == []
    assert sorted(graph.get_state(config).values["answers"]) == ["no", "yes"]


def test_pending_approvals_are_the_exported_type_in_both_flavours(
    saver: DurablePostgresSaver, db_dsn: str
) -> None:
    import asyncio

    from langgraph_durable import AsyncDurablePostgresSaver
    from langgraph_durable.approvals import PendingApproval, apending_approvals

    graph = refund_graph(saver)
    thread, _ = start(graph, amount=55)
    found = pending_approvals(saver, thread_id=thread)
    assert [type(p) for p in found] == [PendingApproval]

    async def listed() -> list[Any]:
        async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as asaver:
            return await apending_approvals(asaver, thread_id=thread)

    assert [type(p) for p in asyncio.run(listed())] == [PendingApproval]


def test_resuming_a_thread_that_never_existed_says_so(saver: DurablePostgresSaver) -> None:
    graph = refund_graph(saver)
    with pytest.raises(NotWaitingError, match="no checkpoints") as raised:
        resume_approval(graph, "no-such-thread", {"approved": True, "approver": "ana"})
    assert "finished" not in str(raised.value)


class NoDecisionKeys(TypedDict, total=False):
    order_id: str
    amount: int
    log: Annotated[list[str], operator.add]


def test_approval_before_a_node_needs_the_decision_keys_in_the_state() -> None:
    builder = StateGraph(NoDecisionKeys)
    builder.add_node("refund", lambda s: {"log": ["refund"]})
    builder.add_edge(START, "refund")
    with pytest.raises(ConfigurationError, match="'approval', 'approval_outcome'"):
        add_approval_before(builder, "refund", request=lambda s: s)
    assert "approve_refund" not in builder.nodes  # nothing was changed


class WithDecisionKeys(NoDecisionKeys, total=False):
    approval: dict[str, Any]
    approval_outcome: str


def test_an_approval_node_added_by_hand_checks_the_keys_each_time_it_runs(
    saver: DurablePostgresSaver,
) -> None:
    """One node object in two graphs: the graph without the keys is refused, every time."""
    node = approval_node(request=lambda s: s, on_approve=END)

    def compiled(schema: Any) -> Any:
        builder = StateGraph(schema)
        builder.add_node("approve", node, destinations=(END,))
        builder.add_edge(START, "approve")
        return builder.compile(checkpointer=saver)

    with_keys, without_keys = compiled(WithDecisionKeys), compiled(NoDecisionKeys)
    start_state = {"order_id": "o", "amount": 1, "log": []}
    with_keys.invoke(start_state, {"configurable": {"thread_id": f"keys-{uuid.uuid4()}"}})
    for _ in range(2):
        config = {"configurable": {"thread_id": f"keys-{uuid.uuid4()}"}}
        with pytest.raises(ConfigurationError, match="decision would be dropped"):
            without_keys.invoke(start_state, config)


def test_async_hooks_are_refused_when_the_node_is_made() -> None:
    async def request(state: Any) -> Any:
        return state

    with pytest.raises(ConfigurationError, match="plain functions"):
        approval_node(request=request, on_approve=END)


def test_pending_approvals_need_a_langgraph_durable_saver(db_dsn: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with (
        PostgresSaver.from_conn_string(db_dsn) as upstream,
        pytest.raises(WrongSaverClassError, match="PostgresSaver"),
    ):
        pending_approvals(upstream)  # type: ignore[arg-type]


def test_the_guard_reports_once_at_the_users_effect_call(
    saver: DurablePostgresSaver, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[str] = []
    graph = wrong_way_graph(saver, sent)
    config = {"configurable": {"thread_id": f"once-{uuid.uuid4()}"}}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        graph.invoke({"log": []}, config, durability="sync")
    reports = [w for w in seen if issubclass(w.category, SideEffectBeforeInterruptWarning)]
    assert len(reports) == 1
    assert reports[0].filename == __file__
    assert reports[0].lineno == SEND_EMAIL_LINE
    assert not [r for r in caplog.records if r.name == "langgraph_durable.guard"]


def wrong_way_graph(saver: DurablePostgresSaver, sent: list[str]) -> Any:
    @effect(name="send_email")
    def send_email(to: str) -> str:
        sent.append(to)
        return "sent"

    def review_and_ask(state: Refund) -> dict[str, Any]:
        send_email("customer@example.com")  # wrong: an effect before interrupt() (SEND_EMAIL)
        answer = interrupt({"question": "refund?"})
        return {"log": [f"answer:{answer}"]}

    builder = StateGraph(Refund)
    builder.add_node("review_and_ask", review_and_ask)
    builder.add_edge(START, "review_and_ask")
    builder.add_edge("review_and_ask", END)
    return builder.compile(checkpointer=saver)


def test_runtime_guard_warns_and_the_journal_still_sends_once(
    saver: DurablePostgresSaver,
) -> None:
    sent: list[str] = []
    graph = wrong_way_graph(saver, sent)
    config = {"configurable": {"thread_id": f"wrong-{uuid.uuid4()}"}}
    with pytest.warns(SideEffectBeforeInterruptWarning, match="move send_email"):
        graph.invoke({"log": []}, config, durability="sync")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SideEffectBeforeInterruptWarning)
        graph.invoke(Command(resume="yes"), config, durability="sync")
    assert sent == ["customer@example.com"]


def test_strict_guard_raises(saver: DurablePostgresSaver) -> None:
    sent: list[str] = []
    graph = wrong_way_graph(saver, sent)
    set_interrupt_guard("strict")
    try:
        with pytest.raises(SideEffectBeforeInterruptError, match="review_and_ask"):
            graph.invoke({"log": []}, {"configurable": {"thread_id": f"strict-{uuid.uuid4()}"}})
    finally:
        set_interrupt_guard("warn")


def test_check_graph_finds_effects_and_clients_before_interrupts(
    saver: DurablePostgresSaver,
) -> None:
    graph = wrong_way_graph(saver, [])

    @tool
    def email_customer(text: str) -> str:
        """Email the customer."""
        with smtplib.SMTP("localhost") as smtp:  # pragma: no cover - never run
            smtp.sendmail("a@b", ["c@d"], text)
        return "ok"

    @tool
    def ask_manager(question: str) -> str:
        """Ask a manager."""
        return str(interrupt(question))

    tools = StateGraph(MessagesState)
    tools.add_node("tools", ToolNode([email_customer, ask_manager]))
    tools.add_node("fine", approval_node(lambda s: {}, on_approve=END))
    tools.add_edge(START, "tools")
    tools.add_edge("tools", END)
    findings = check_graph(graph) + check_graph(tools.compile())
    by_node = {f.node: f for f in findings}
    assert set(by_node) == {"review_and_ask", "tools"}
    assert by_node["review_and_ask"].file.endswith("test_approvals.py")
    assert [name for name, _ in by_node["review_and_ask"].effects] == ["send_email"]
    assert "smtplib.SMTP" in by_node["tools"].message
    assert "move" in by_node["tools"].message
    _ = AIMessage  # tool graphs take AIMessage tool calls; not invoked here


def test_cli_lists_waiting_approvals(
    saver: DurablePostgresSaver, db_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from langgraph_durable.cli import main as cli

    graph = refund_graph(saver)
    thread, _ = start(graph, amount=55)
    assert cli(["--dsn", db_dsn, "approvals", "--thread", thread]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("THREAD_ID")
    assert "WAITING" in shown
    assert thread in shown
    assert cli(["--dsn", db_dsn, "--json", "approvals", "--thread", thread]) == 0
    listed = json.loads(capsys.readouterr().out)["approvals"]
    assert listed[0]["value"]["request"] == {"order": thread, "amount": 55}
