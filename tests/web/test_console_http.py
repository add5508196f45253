"""Every console route over HTTP (Starlette's TestClient) against a real Postgres.

Answers go through the library: the graph's authorize hook refuses lead-bo ($200 limit)
for a $420 refund before anything is sent; CSRF, read-only mode and a stale page refuse
before anything is read or done; the refund happens once.
"""

from __future__ import annotations

import asyncio
import html
import re
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import psycopg
import pytest
from console_host import ELEVEN, PAIR, parallel_builder, recheck_builder, sequence_builder
from console_world import client_for, csrf_of, form_fields, start_plain, start_run, work
from graphs import application_graph
from starlette.testclient import TestClient

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    RunRegistry,
    RunStatus,
    Worker,
)
from langgraph_durable.approvals import ApprovalDecision, add_approval_before, pending_approvals
from langgraph_durable.effects import EffectJournal, journal_of
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.web._forms import in_form


def count(dsn: str, sql: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def refunds(dsn: str) -> int:
    return count(dsn, "SELECT count(*) FROM northwind_payments WHERE order_id = '8890'")


def emails(dsn: str, thread: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT subject FROM northwind_emails WHERE thread_id = %s ORDER BY id", (thread,)
        ).fetchall()
    return [r[0] for r in rows]


def waiting(dsn: str, thread: str) -> int:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        return len(pending_approvals(saver, thread_id=thread))


def approval_page(client: TestClient, thread: str) -> str:
    page = client.get("/console/approval", params={"thread_id": thread})
    assert page.status_code == 200, page.text
    return page.text


def answer(client: TestClient, fields: dict[str, str], **form: str) -> Any:
    return client.post("/console/approval/answer", data={**fields, **form})


def test_inbox_shows_what_is_asked_age_and_who_may_answer(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    empty = ana.get("/console/")
    assert empty.status_code == 200
    assert "Nothing is waiting" in empty.text
    thread = start_plain(world, example)
    page = ana.get("/console/").text
    assert thread in page
    assert "&#34;amount&#34;: 420" in page  # the payload, escaped
    assert "ana@example.com" in page
    assert "you (manager-ana) may answer" in page
    assert "plain invoke" in page
    assert world not in page  # the DSN is never shown


def test_approve_in_process_refunds_once_and_a_second_post_is_refused(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    thread = start_plain(world, example)
    fields = form_fields(approval_page(ana, thread))
    done = answer(ana, fields, action="approve", comment="ok for 8890")
    assert done.status_code == 303
    assert done.headers["location"] == "/console/?notice=answered"
    assert "the run went on" in ana.get(done.headers["location"]).text
    assert refunds(world) == 1
    assert emails(world, thread) == ["Refund of $420 under review", "Your $420 refund is done"]
    again = answer(ana, fields, action="approve")  # a second click, a stale page
    assert again.status_code == 409
    assert "answered, or asked again" in again.text
    assert refunds(world) == 1
    assert len(emails(world, thread)) == 2


def test_an_approver_without_rights_is_refused_before_anything_is_sent(
    world: str, example: ModuleType
) -> None:
    thread = start_plain(world, example)
    for bo in client_for(world, "lead-bo"):
        page = approval_page(bo, thread)
        assert "not you: may approve up to $200" in page
        assert 'value="approve"' not in page  # no form for someone the hook refuses
    for ana in client_for(world, "manager-ana"):
        fields = form_fields(approval_page(ana, thread))
    for bo in client_for(world, "lead-bo"):
        # lead-bo posts the form anyway, with a token of their own session: the same
        # authorize hook refuses, approve or reject, and nothing is sent.
        mine = {**fields, "csrf_token": csrf_of(bo.get("/console/").text)}
        for action in ("approve", "reject"):
            refused = answer(bo, mine, action=action)
            assert refused.status_code == 403, refused.text
            assert "lead-bo may not answer this: may approve up to $200" in html.unescape(
                refused.text
            )
    assert waiting(world, thread) == 1
    assert refunds(world) == 0


def test_a_post_without_or_with_a_wrong_csrf_token_is_refused(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    thread = start_plain(world, example)
    fields = form_fields(approval_page(ana, thread))
    missing = {k: v for k, v in fields.items() if k != "csrf_token"}
    assert answer(ana, missing, action="approve").status_code == 403
    wrong = answer(ana, {**fields, "csrf_token": "0" * 64}, action="approve")
    assert wrong.status_code == 403
    assert "security token is missing or belongs to another session" in wrong.text
    # The right token from another browser's session: refused too.
    for other in client_for(world, "manager-ana"):
        stolen = answer(other, fields, action="approve")
        assert stolen.status_code == 403
        resolved = other.post("/console/effects/resolve", data={"key": "k", "how": "failed"})
        assert resolved.status_code == 403
    assert waiting(world, thread) == 1
    assert refunds(world) == 0


def test_read_only_mode_shows_everything_and_acts_on_nothing(
    world: str, example: ModuleType
) -> None:
    thread = start_plain(world, example)
    for ro in client_for(world, "manager-ana", read_only=True):
        page = approval_page(ro, thread)
        assert "read-only" in page
        assert 'value="approve"' not in page
        # Who may answer says so too: it once said "you (manager-ana) may answer".
        for shown in (page, ro.get("/console/").text):
            assert "nobody here: this console is read-only" in shown
            assert "you (manager-ana) may" not in shown
        token = csrf_of(page)
        fields = {"csrf_token": token, "thread": in_form(thread), "question": "x"}
        refused = answer(ro, fields, action="approve")
        assert refused.status_code == 403
        assert "read-only" in refused.text
        resolved = ro.post(
            "/console/effects/resolve", data={"csrf_token": token, "key": "k", "how": "failed"}
        )
        assert resolved.status_code == 403
    assert waiting(world, thread) == 1


def test_signed_out_users_are_refused_and_a_console_without_auth_cannot_act(
    world: str, example: ModuleType
) -> None:
    thread = start_plain(world, example)
    for nobody in client_for(world):
        for path in ("/console/", "/console/runs", "/console/effects"):
            assert nobody.get(path).status_code == 401
    for open_console in client_for(world, with_auth=False):
        page = approval_page(open_console, thread)
        assert "not signed in" in page
        fields = {"csrf_token": csrf_of(page), "thread": in_form(thread), "question": "x"}
        refused = answer(open_console, fields, action="approve")
        assert refused.status_code == 403
        assert "no authentication hook" in refused.text
    assert waiting(world, thread) == 1


def test_reject_and_amend_go_through_the_decision_model(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    rejected = start_plain(world, example)
    fields = form_fields(approval_page(ana, rejected))
    bad = answer(ana, fields, action="amend", amended="[1, 2]")
    assert bad.status_code == 400
    assert "JSON object" in bad.text
    assert answer(ana, fields, action="reject", comment="no").status_code == 303
    assert waiting(world, rejected) == 0
    assert refunds(world) == 0
    amended = start_plain(world, example)
    fields = form_fields(approval_page(ana, amended))
    done = answer(ana, fields, action="amend", amended='{"amount": 300}', comment="partial")
    assert done.status_code == 303
    with DurablePostgresSaver.from_conn_string(world) as saver:
        state = saver.get_tuple({"configurable": {"thread_id": amended}})
    assert state is not None
    decision = state.checkpoint["channel_values"]["approval"]
    assert decision["amended"] == {"amount": 300}
    assert decision["approver"] == "manager-ana"
    assert decision["comment"] == "partial"


def test_approve_with_amended_fields_typed_is_refused_and_sends_nothing(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    """The "Approve" button sits beside the amended-fields box: pressed with changes typed
    in, the console once approved the $420 refund unchanged and said the answer was sent."""
    thread = start_plain(world, example)
    fields = form_fields(approval_page(ana, thread))
    refused = answer(ana, fields, action="approve", amended='{"amount": 300}')
    assert refused.status_code == 400
    assert 'Nothing was sent: press "Approve with changes"' in html.unescape(refused.text)
    assert waiting(world, thread) == 1
    assert refunds(world) == 0
    # Blank (whitespace) amended fields are no changes: Approve approves as asked.
    done = answer(ana, fields, action="approve", amended="  \n")
    assert done.headers["location"] == "/console/?notice=answered", done.text
    assert refunds(world) == 1


def test_a_registry_run_is_queued_for_a_worker_and_answered_once(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    run_id, thread = start_run(world, example)
    inbox = ana.get("/console/").text
    assert f"/console/runs/{run_id}" in inbox
    fields = form_fields(approval_page(ana, thread))
    done = answer(ana, fields, action="approve")
    assert done.status_code == 303
    assert done.headers["location"] == "/console/?notice=queued"
    assert "answered: its run is pending" in ana.get("/console/").text
    again = answer(ana, fields, action="approve")
    assert again.status_code == 409
    work(world, example)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        assert RunRegistry(saver).get(run_id).status is RunStatus.SUCCESS
    assert refunds(world) == 1
    assert emails(world, thread) == ["Refund of $420 under review", "Your $420 refund is done"]
    assert answer(ana, fields, action="approve").status_code == 409
    assert refunds(world) == 1


def test_runs_run_and_thread_pages(world: str, example: ModuleType, ana: TestClient) -> None:
    run_id, thread = start_run(world, example)
    runs = ana.get("/console/runs")
    assert runs.status_code == 200
    assert run_id in runs.text
    assert 'id="status-interrupted"' in runs.text
    assert ana.get("/console/runs", params={"status": "interrupted"}).status_code == 200
    assert ana.get("/console/runs", params={"status": "nonsense"}).status_code == 400
    run = ana.get(f"/console/runs/{run_id}")
    assert run.status_code == 200
    assert 'id="status">interrupted<' in run.text
    assert ana.get("/console/runs/no-such-run").status_code == 404
    fields = form_fields(approval_page(ana, thread))
    bad_thread = {**fields, "thread": in_form("a\x00b")}  # text Postgres cannot store
    assert answer(ana, bad_thread, action="approve").status_code == 404
    answer(ana, fields, action="approve")
    work(world, example)
    timeline = ana.get("/console/thread", params={"thread_id": thread})
    assert timeline.status_code == 200
    text = timeline.text
    for node in ("find_order", "check_rules", "tell_customer", "wait_for_manager", "refund"):
        assert f'<td class="node">{node}' in text, node
    assert "refund: completed, attempt 1" in text
    assert "email: completed, attempt 1" in text
    assert "→ check_rules" in text
    assert ana.get("/console/thread", params={"thread_id": "nope"}).status_code == 404
    for page in ("/console/thread", "/console/approval"):
        for bad in ("a\x00b", "\x00"):  # text Postgres cannot store
            assert ana.get(page, params={"thread_id": bad}).status_code == 404, (page, bad)


def test_unknown_effects_are_listed_and_resolved(world: str, ana: TestClient) -> None:
    with DurablePostgresSaver.from_conn_string(world) as saver:
        journal = journal_of(saver)
        assert isinstance(journal, EffectJournal)
        for key in ("charge:1", "charge:2", "charge:3"):
            attempt = journal.claim(key, "charge", "hash", 30.0, None)
            assert attempt is not None
            journal.mark_unknown(key, attempt, error_type="TimeoutError", error_message="slow")
    page = ana.get("/console/effects")
    assert page.status_code == 200
    assert page.text.count('class="card s-unknown effect"') == 3
    token = csrf_of(page.text)
    cases = [
        ("charge:1", {"how": "allow_retry"}),
        ("charge:2", {"how": "completed", "result": '{"charge_id": 7}'}),
        ("charge:3", {"how": "failed", "reason": "the bank says it never arrived"}),
    ]
    for key, how in cases:
        data = {"csrf_token": token, "key64": in_form(key), "attempt": "1", **how}
        done = ana.post("/console/effects/resolve", data=data)
        assert done.status_code == 303, done.text
    assert "No effect has an unknown outcome" in ana.get("/console/effects?notice=resolved").text
    with DurablePostgresSaver.from_conn_string(world) as saver:
        journal = journal_of(saver)
        assert isinstance(journal, EffectJournal)
        rows = {k: journal.get(k) for k in ("charge:1", "charge:2", "charge:3")}
    assert {k: (r.status if r else None) for k, r in rows.items()} == {
        "charge:1": "retry_wait",
        "charge:2": "completed",
        "charge:3": "failed",
    }
    by = "SELECT count(*) FROM langgraph_durable_effects WHERE resolved_by = 'console:manager-ana'"
    assert count(world, by) == 3
    again = ana.post(
        "/console/effects/resolve",
        data={
            "csrf_token": token,
            "key64": in_form("charge:1"),
            "attempt": "1",
            "how": "failed",
            "reason": "x",
        },
    )
    assert again.status_code == 409
    bad = ana.post(
        "/console/effects/resolve",
        data={
            "csrf_token": token,
            "key64": in_form("charge:2"),
            "attempt": "1",
            "how": "completed",
            "result": "{",
        },
    )
    assert bad.status_code == 400


def test_everything_shown_is_escaped(world: str, example: ModuleType, ana: TestClient) -> None:
    with psycopg.connect(world, autocommit=True) as conn:
        conn.execute(
            "UPDATE northwind_orders SET customer = '<script>alert(1)</script>' "
            "WHERE order_id = '8890'"
        )
    thread = start_plain(world, example)
    for page in (ana.get("/console/").text, approval_page(ana, thread)):
        assert "<script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_graph_revalidates_an_approved_refund_that_became_moot(
    world: str, example: ModuleType, ana: TestClient
) -> None:
    thread = start_plain(world, example)
    fields = form_fields(approval_page(ana, thread))
    example.payment_refund(world, "8890", 420, None)  # someone refunds by hand meanwhile
    assert answer(ana, fields, action="approve").status_code == 303
    assert refunds(world) == 1  # the manual one; revalidate said no_longer_needed
    assert emails(world, thread) == ["Refund of $420 under review"]
    with DurablePostgresSaver.from_conn_string(world) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert found is not None
    assert found.checkpoint["channel_values"]["approval_outcome"] == "no_longer_needed"


def test_an_answer_the_node_judges_again_is_asked_again_on_the_page(
    world: str, ana: TestClient
) -> None:
    thread = "recheck-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        recheck_builder().compile(checkpointer=saver).invoke(
            {"item": "laptop"}, {"configurable": {"thread_id": thread}}
        )
    fields = form_fields(approval_page(ana, thread))
    first = answer(ana, fields, action="approve", comment="ok")
    assert first.status_code == 303
    assert first.headers["location"] == (f"/console/approval?notice=asked_again&thread_id={thread}")
    page = ana.get(first.headers["location"]).text
    assert "the graph asks again" in page
    assert "the request changed since it was approved; approve it again" in page
    assert answer(ana, fields, action="approve", comment="really").status_code == 409
    fields = form_fields(page)
    done = answer(ana, fields, action="approve", comment="really")
    assert done.headers["location"] == "/console/?notice=answered"
    assert waiting(world, thread) == 0
    missing = ana.get("/console/approval", params={"thread_id": thread})
    assert missing.status_code == 404
    assert "is not waiting for an answer" in missing.text


def test_of_two_questions_asked_at_once_the_page_answers_the_one_it_showed(
    world: str, ana: TestClient
) -> None:
    """Each question has its own form; answering the second must not answer the first
    (the console once sent every answer to the thread's first question)."""
    thread = "pair-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        parallel_builder(PAIR).compile(checkpointer=saver).invoke(
            {"item": "desk"}, {"configurable": {"thread_id": thread}}
        )
        asked = pending_approvals(saver, thread_id=thread)
    assert len(asked) == 2
    page = approval_page(ana, thread)
    tokens = re.findall(r'name="question" value="([^"]+)"', page)
    assert len(tokens) == 2
    fields = {**form_fields(page), "question": tokens[1]}
    done = answer(ana, fields, action="approve", comment="second")
    assert done.headers["location"] == "/console/?notice=answered"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        left = [p.interrupt_id for p in pending_approvals(saver, thread_id=thread)]
    assert left == [asked[0].interrupt_id]
    fields = {**form_fields(approval_page(ana, thread))}
    done = answer(ana, fields, action="reject", comment="first")
    assert done.headers["location"] == "/console/?notice=answered"
    assert waiting(world, thread) == 0


def test_a_thread_waiting_on_eleven_questions_shows_and_answers_each(
    world: str, ana: TestClient
) -> None:
    """Every question of a thread has a form, and answering one says answered: the
    console once fetched ten, so the eleventh had no form and came into view after an
    answer, which the page then took for the question asked again."""
    thread = "eleven-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        parallel_builder(ELEVEN).compile(checkpointer=saver).invoke(
            {"item": "chairs"}, {"configurable": {"thread_id": thread}}
        )
    page = approval_page(ana, thread)
    tokens = re.findall(r'name="question" value="([^"]+)"', page)
    assert len(tokens) == len(ELEVEN)
    done = answer(ana, form_fields(page), action="approve", comment="first")
    assert done.headers["location"] == "/console/?notice=answered"
    assert waiting(world, thread) == len(ELEVEN) - 1


def test_the_next_question_of_the_answered_task_is_not_the_answer_refused(
    world: str, ana: TestClient
) -> None:
    """A subgraph asks its second question in the same task of the parent graph, at the
    same checkpoint, under a new interrupt id: the answer went through, and the page says
    so (it once took the second question for the first asked again)."""
    thread = "sequence-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        sequence_builder().compile(checkpointer=saver).invoke(
            {"item": "van"}, {"configurable": {"thread_id": thread}}
        )
        (first,) = pending_approvals(saver, thread_id=thread)
    done = answer(ana, form_fields(approval_page(ana, thread)), action="approve", comment="1")
    assert done.headers["location"] == "/console/?notice=answered"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        (second,) = pending_approvals(saver, thread_id=thread)
    assert (second.task_id, second.value["request"]["step"]) == (first.task_id, "second")
    done = answer(ana, form_fields(approval_page(ana, thread)), action="approve", comment="2")
    assert done.headers["location"] == "/console/?notice=answered"
    assert waiting(world, thread) == 0


@pytest.mark.parametrize("kind", ["plain thread", "registry run"])
def test_answers_sent_at_once_approve_once(
    world: str, example: ModuleType, console: str, kind: str
) -> None:
    """Five clicks at once on uvicorn: one answer goes through, four are refused."""
    if kind == "registry run":
        _, thread = start_run(world, example)
    else:
        thread = start_plain(world, example)

    async def clicks() -> list[int]:
        cookies = {"demo_user": "manager-ana"}
        async with httpx.AsyncClient(base_url=console, cookies=cookies) as client:
            page = await client.get("/console/approval", params={"thread_id": thread})
            fields = {**form_fields(page.text), "action": "approve"}
            sent = [client.post("/console/approval/answer", data=fields) for _ in range(5)]
            return sorted(r.status_code for r in await asyncio.gather(*sent))

    assert asyncio.run(clicks()) == [303, 409, 409, 409, 409]
    if kind == "registry run":
        work(world, example)
    assert refunds(world) == 1
    assert emails(world, thread) == ["Refund of $420 under review", "Your $420 refund is done"]


def test_the_applications_own_types_are_shown_without_its_code(
    world: str, ana: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A console started without the application's modules shows its types' stored
    fields on the thread's timeline and the run's page, instead of refusing them."""
    app, builder = application_graph(tmp_path, monkeypatch)
    module = app.__name__
    thread = f"console-app-{uuid.uuid4().hex[:8]}"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        version = GraphVersion("deals", "1", builder.compile(checkpointer=saver))
        run = RunRegistry(saver).create(
            version, {"deal": app.Deal(name="a", amount=1)}, thread_id=thread
        )
        Worker(saver, [version]).run_until_idle()
    monkeypatch.delitem(sys.modules, module)  # as in the console's own process

    timeline = ana.get("/console/thread", params={"thread_id": thread})
    assert timeline.status_code == 200
    shown = html.unescape(timeline.text)
    assert f'"__class__": "{module}.Deal"' in shown
    assert '"amount": 2' in shown
    assert "cannot show this value" not in shown
    page = ana.get(f"/console/runs/{run.run_id}")
    assert page.status_code == 200
    assert f'"__class__": "{module}.Deal"' in html.unescape(page.text)
    assert module not in sys.modules  # shown from the stored fields, never imported


def test_an_async_authorize_hook_is_refused_when_the_approval_is_added() -> None:
    """The approval node calls `authorize` without awaiting it, so an async one refused
    everyone when the answer arrived (the console's page too); it is refused at once,
    an object whose `__call__` is async as well."""

    async def only_cfo(state: Any, decision: ApprovalDecision) -> bool:
        return decision.approver == "cfo"

    class OnlyCfo:
        async def __call__(self, state: Any, decision: ApprovalDecision) -> bool:
            return decision.approver == "cfo"

    for hook in (only_cfo, OnlyCfo()):
        builder = recheck_builder()
        builder.add_node("pay", lambda state: {})
        with pytest.raises(ConfigurationError, match="authorize hook is async"):
            add_approval_before(builder, "pay", request=lambda s: {}, authorize=hook)
