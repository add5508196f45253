"""The console's pure parts: ages, question tokens, grouping, the timeline, approval hooks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt

from langgraph_durable.approvals import (
    ApprovalDecision,
    PendingApproval,
    UnreadableQuestion,
    approval_node,
)
from langgraph_durable.approvals._node import APPROVAL_KIND, hooks_of
from langgraph_durable.runs import Run, RunStatus
from langgraph_durable.serde import SafeEncryptedSerializer, SafeSerializer
from langgraph_durable.web._views import (
    STATUS_ORDER,
    as_json,
    by_status,
    human_age,
    node_of_task_path,
    question_token,
    questions_by_token,
    redacted,
    shown_error,
    timeline,
)


@dataclass
class Made:
    """An application's own type, which the strict serializer is told not to build."""

    n: int


def row(value: Any, checkpoint_id: str = "c1", blob: bytes | None = None) -> dict[str, Any]:
    """A `pending_interrupts` row: one task's `__interrupt__` write asking `value`."""
    type_, stored = SafeSerializer().dumps_typed([Interrupt(value=value, id="i1")])
    return {
        "thread_id": "t",
        "checkpoint_id": checkpoint_id,
        "task_id": "task-1",
        "type": type_,
        "blob": stored if blob is None else blob,
        "waiting_since": None,
        "db_now": None,
    }


def test_ages_show_their_two_largest_units() -> None:
    assert human_age(timedelta(hours=15, minutes=2, seconds=9)) == "15h 2m"
    assert human_age(timedelta(days=3, hours=4)) == "3d 4h"
    assert human_age(timedelta(seconds=12)) == "12s"
    assert human_age(timedelta(seconds=-5)) == "0s"
    assert human_age(None) == "unknown"


def test_a_question_token_is_the_stored_rows_and_changes_when_the_question_is_asked_again() -> None:
    first = {"kind": "x", "request": {"amount": 420}}
    again = {**first, "refused": "lead-bo: may approve up to $200"}
    assert question_token(row(first), "i1") == question_token(row(dict(first)), "i1")
    assert question_token(row(first), "i1") != question_token(row(again), "i1")
    assert question_token(row(first), "i1") != question_token(row(first, "c2"), "i1")
    assert question_token(row(first), "i1") != question_token(row(first), "i2")


def test_a_question_token_under_encryption_is_the_same_for_each_writing() -> None:
    """Answering one of two parallel questions writes the other's row again, with a new
    nonce: its token changed and its form was refused as if answered or asked again."""
    key = b"k" * 16
    serde = SafeEncryptedSerializer(EncryptedSerializer.from_pycryptodome_aes(key=key).cipher)
    asked = [Interrupt(value={"kind": "x"}, id="i1")]
    once, twice = serde.dumps_typed(asked), serde.dumps_typed(asked)
    assert once[1] != twice[1]  # a new nonce each time
    first, second = row(None), row(None)
    first["type"], first["blob"] = once
    second["type"], second["blob"] = twice
    assert question_token(first, "i1", serde) == question_token(second, "i1", serde)
    other = row(None)
    other["type"], other["blob"] = serde.dumps_typed([Interrupt(value={"kind": "y"}, id="i1")])
    assert question_token(first, "i1", serde) != question_token(other, "i1", serde)


def test_questions_are_loaded_to_be_shown_each_row_on_its_own() -> None:
    """A value of a type the serializer may not build is shown by its fields; a row that
    cannot be loaded at all is listed as unreadable, and the rows beside it as usual."""
    type_, blob = JsonPlusSerializer().dumps_typed([Interrupt(value={"n": Made(3)}, id="i9")])
    made = {**row(None), "type": type_, "blob": blob}
    rows = [row({1: "one", "two": 2}), made, row(None, blob=b"\xc1"), row({"kind": "x"}, "c2")]
    found = list(questions_by_token(SafeSerializer(strict=True), rows).values())
    assert [type(q).__name__ for q in found] == [
        "PendingApproval", "PendingApproval", "UnreadableQuestion", "PendingApproval"
    ]  # fmt: skip
    assert isinstance(found[0], PendingApproval)
    assert found[0].value == {1: "one", "two": 2}
    assert isinstance(found[1], PendingApproval)
    assert found[1].value["n"]["n"] == 3  # its stored fields: not built
    assert isinstance(found[2], UnreadableQuestion)
    assert found[2].checkpoint_id == "c1"
    assert as_json(found[0].value) == '{\n  "1": "one",\n  "two": 2\n}'


def test_long_values_are_cut_and_odd_ones_shown() -> None:
    assert as_json({"b": 1, "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
    assert as_json("x" * 50, limit=10).endswith("(42 more characters)")
    assert as_json({1, 2}) == '"{1, 2}"'  # not JSON: its str


def test_task_paths_name_their_nodes() -> None:
    assert node_of_task_path("~__pregel_pull, find_order") == "find_order"
    assert node_of_task_path("~__pregel_push, ~__pregel_pull, fan, 0") == "(sent task)"
    assert node_of_task_path("") == "(answer or update from outside)"


def test_the_timeline_puts_writes_and_effects_under_their_step_and_node() -> None:
    serde = JsonPlusSerializer()
    checkpoints = [
        {"checkpoint_id": "c0", "metadata": {"step": 0, "source": "loop"}, "created_at": 1},
        {"checkpoint_id": "c1", "metadata": {"step": 1, "source": "loop"}, "created_at": 2},
    ]
    typed = serde.dumps_typed(420)
    writes = [
        {"checkpoint_id": "c0", "task_id": "a", "task_path": "~__pregel_pull, refund",
         "channel": "payment", "type": typed[0], "blob": typed[1]},
        {"checkpoint_id": "c0", "task_id": "a", "task_path": "~__pregel_pull, refund",
         "channel": "branch:to:confirm", "type": "null", "blob": b""},
        {"checkpoint_id": "gone", "task_id": "b", "task_path": "~__pregel_pull, x",
         "channel": "y", "type": typed[0], "blob": typed[1]},
    ]  # fmt: skip
    effects = [
        {"key": "refund:8890", "node": "refund", "step": 1, "status": "completed"},
        {"key": "other", "node": "elsewhere", "step": 7, "status": "unknown"},
    ]
    steps, unplaced = timeline(serde, checkpoints, writes, effects)
    assert [s.checkpoint_id for s in steps] == ["c0", "c1"]
    (task,) = steps[0].tasks
    assert (task.node, task.writes, task.routes) == ("refund", [("payment", "420")], ["confirm"])
    assert [e["key"] for e in task.effects] == ["refund:8890"]
    assert steps[1].tasks == []
    assert [e["key"] for e in unplaced] == ["other"]


def test_approval_nodes_record_their_hooks_and_nothing_else_has_any() -> None:
    def authorize(state: Any, decision: ApprovalDecision) -> bool | str:
        return decision.approver == "ana"

    node = approval_node(lambda s: s, on_approve="next", authorize=authorize)
    hooks = hooks_of(node)
    assert hooks is not None
    assert hooks.authorize is authorize
    assert hooks.decision_model is ApprovalDecision
    assert hooks_of(lambda s: s) is None
    assert hooks_of(42) is None


def test_runs_are_grouped_by_status_people_first() -> None:
    def run(run_id: str, status: RunStatus) -> Run:
        return Run(run_id, "t", "g", "1", status, None, "enqueue", "sync", 0, 3, {}, {})

    found = by_status([run("a", RunStatus.SUCCESS), run("b", RunStatus.BLOCKED),
                       run("c", RunStatus.SUCCESS)])  # fmt: skip
    assert [(s, [r.run_id for r in rs]) for s, rs in found] == [
        (RunStatus.BLOCKED, ["b"]),
        (RunStatus.SUCCESS, ["a", "c"]),
    ]
    assert set(STATUS_ORDER) == set(RunStatus)


def test_a_graph_error_is_shown_short_and_without_passwords() -> None:
    error = ValueError(
        "no: postgresql://u:pw1@db/x host=db password='pw2 x' PASSWORD = pw3 " + "z" * 500
    )
    text = shown_error(error)
    assert text.startswith("ValueError: no: postgresql://***@db/… host=db password=*** ")
    assert all(secret not in text for secret in ("pw1", "pw2", "pw3"))
    assert len(text) == 301
    assert text.endswith("…")
    assert shown_error(KeyError("k")) == "KeyError: 'k'"
    assert redacted(None) == ""
    assert redacted("POST https://u:tok@hooks.example/x failed") == (
        "POST https://***@hooks.example/… failed"
    )


@dataclass
class Elsewhere:
    """A type of a module this process never imported (as in a console without the
    application's code)."""

    n: int


Elsewhere.__module__ = "an_application_not_imported"


def test_a_question_around_a_type_that_may_not_be_built_keeps_its_id_and_kind() -> None:
    """The describing serializer shows the `Interrupt` around such a value as its stored
    fields too: its id and value are read from them."""
    asked = Interrupt(value={"kind": APPROVAL_KIND, "request": Elsewhere(3)}, id="i7")
    type_, blob = JsonPlusSerializer().dumps_typed([asked])
    stored = {**row(None), "type": type_, "blob": blob}
    (found,) = questions_by_token(SafeSerializer(), [stored]).values()
    assert isinstance(found, PendingApproval)
    assert (found.interrupt_id, found.is_approval) == ("i7", True)
    assert found.value["request"] == {"__class__": "an_application_not_imported.Elsewhere", "n": 3}
