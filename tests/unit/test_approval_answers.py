"""Which question an approval answer goes to, when a thread waits on more than one.

`answer_for` (from the graph's state) and `answer_from_pending` (from the listing) must
pick the same one: the first approval by task id, the order `pending_approvals` lists.
LangGraph orders `state.interrupts` by its tasks, not by their ids, so the snapshot here
lists its tasks against id order on purpose.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from langgraph.types import Interrupt, PregelTask, StateSnapshot

from langgraph_durable import NotWaitingError
from langgraph_durable.approvals import (
    ApprovalDecision,
    PendingApproval,
    answer_for,
    answer_from_pending,
    approval_to_answer,
    asked_again,
    refusal_of,
)

THREAD = "two-approvals"
DECISION = ApprovalDecision(approved=True, approver="ana")


def approval(interrupt_id: str) -> Interrupt:
    # The payload an `approval_node` asks with, as stored in the thread's checkpoints.
    return Interrupt(
        value={"kind": "langgraph_durable.approval", "request": {"asked": interrupt_id}},
        id=interrupt_id,
    )


def snapshot(tasks: list[tuple[str, Interrupt]]) -> StateSnapshot:
    pregel_tasks = tuple(
        PregelTask(
            id=task_id, name=f"node-{task_id}", path=("__pregel_pull", task_id), interrupts=(i,)
        )
        for task_id, i in tasks
    )
    return StateSnapshot(
        values={},
        next=tuple(task.name for task in pregel_tasks),
        config={"configurable": {"thread_id": THREAD}},
        metadata=None,
        created_at="2026-12-05T00:00:00+00:00",
        parent_config=None,
        tasks=pregel_tasks,
        interrupts=tuple(i for _, i in tasks),
    )


def pending(interrupt_id: str) -> PendingApproval:
    return PendingApproval(
        thread_id=THREAD,
        checkpoint_id="1",
        interrupt_id=interrupt_id,
        task_id=f"task-of-{interrupt_id}",
        value=approval(interrupt_id).value,
        is_approval=True,
        waiting_since=datetime(2026, 12, 5, tzinfo=timezone.utc),
        age=None,
    )


def test_answer_for_takes_the_first_task_by_id_not_langgraphs_order() -> None:
    state = snapshot([("task-b", approval("asked-by-b")), ("task-a", approval("asked-by-a"))])
    assert list(answer_for(state, THREAD, DECISION)) == ["asked-by-a"]


def test_both_ways_of_answering_pick_the_same_question() -> None:
    state = snapshot([("task-b", approval("asked-by-b")), ("task-a", approval("asked-by-a"))])
    # The listing comes in task order (`pending_interrupts_thread` sorts by task id).
    listed = [pending("asked-by-a"), pending("asked-by-b")]
    assert answer_for(state, THREAD, DECISION) == answer_from_pending(listed, THREAD, DECISION)


def test_one_question_is_answered_with_a_plain_resume() -> None:
    state = snapshot([("task-a", approval("asked-by-a"))])
    assert answer_for(state, THREAD, DECISION) == DECISION.model_dump()


def test_a_question_named_by_an_id_that_waits_nowhere_lists_the_ids_that_do() -> None:
    state = snapshot([("task-b", approval("asked-by-b")), ("task-a", approval("asked-by-a"))])
    listed = [pending("asked-by-a"), pending("asked-by-b")]
    expected = "interrupt id 'typo' (waiting: 'asked-by-a', 'asked-by-b')"
    with pytest.raises(NotWaitingError) as from_state:
        answer_for(state, THREAD, DECISION, interrupt_id="typo")
    with pytest.raises(NotWaitingError) as from_listing:
        approval_to_answer(listed, THREAD, interrupt_id="typo")
    assert expected in str(from_state.value)
    assert expected in str(from_listing.value)
    assert approval_to_answer(listed, THREAD) == listed[0]
    assert approval_to_answer(listed, THREAD, interrupt_id="asked-by-b") == listed[1]


def test_a_question_asked_again_is_the_answered_tasks_new_refusal() -> None:
    """A refusing node asks in the same task under a new interrupt id, with its reason; a
    question of another task, refused earlier or not, is not the answered one asked again."""
    first, second = pending("asked-by-a"), pending("asked-by-b")
    again = replace(first, interrupt_id="asked-again-by-a", value={"refused": "no"})
    assert asked_again([again, second], first, [first, second]) == again
    assert refusal_of(again) == "no"
    assert asked_again([again], second, [again, second]) is None
    assert asked_again([replace(again, checkpoint_id="2")], first, [first]) is None


def test_a_subgraphs_questions_share_a_task_yet_are_told_apart() -> None:
    """A subgraph's questions are all asked in one task of the parent graph: the one that
    waited beside the answered one, with an earlier refusal, is not the answer refused;
    nor is the next question the node asks, which carries no reason."""
    left = pending("left")
    right = replace(pending("right"), task_id=left.task_id)
    left_again = replace(left, interrupt_id="left-again", value={"refused": "eve may not"})
    assert asked_again([right, left_again], left, [left, right]) == left_again
    assert asked_again([left_again], right, [right, left_again]) is None
    asked_next = replace(left, interrupt_id="next", value={"kind": "approval", "request": {}})
    assert asked_again([asked_next], left, [left]) is None
    assert refusal_of(asked_next) is None


def test_an_unknown_interrupt_id_names_only_the_threads_own_questions() -> None:
    elsewhere = replace(pending("of-another-thread"), thread_id="another")
    with pytest.raises(NotWaitingError) as raised:
        approval_to_answer([pending("asked-by-a"), elsewhere], THREAD, interrupt_id="typo")
    assert "(waiting: 'asked-by-a')" in str(raised.value)
