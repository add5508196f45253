"""What the console's pages show of stored values and errors: never a password, and one
value that cannot be shown never takes a whole page down."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from console_world import client_for, csrf_of, form_fields, start_plain, tokens_of
from graphs import application_graph
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from starlette.testclient import TestClient
from test_console_effects import journal
from test_console_http import answer, approval_page, waiting
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, Worker
from langgraph_durable.approvals import add_approval_before
from langgraph_durable.web._forms import in_form

SECRET = "s3cret-pw"
DSN_ERROR = (
    f"the ledger refused: postgresql://ledger:{SECRET}@ledger.internal/books password={SECRET}"
)


class Ledger(TypedDict, total=False):
    item: str


def failed_run(dsn: str) -> str:
    """A registry run whose node failed quoting a DSN with its password; its run id."""

    def post(state: Ledger) -> Ledger:
        raise RuntimeError(DSN_ERROR)

    builder: StateGraph[Any] = StateGraph(Ledger)
    builder.add_node("post", post)
    builder.add_edge(START, "post")
    builder.add_edge("post", END)
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        version = GraphVersion("ledger", "1", builder.compile(checkpointer=saver))
        run = RunRegistry(saver).create(
            version, {"item": "x"}, thread_id="ledger-1", max_attempts=1
        )
        Worker(saver, [version]).run_until_idle()
    return run.run_id


def test_error_text_on_the_run_and_effect_pages_hides_passwords_and_urls(
    world: str, ana: TestClient
) -> None:
    """The registry and the journal store an error as it was raised; every page that shows
    one hides what a DSN or a receiver's URL holds (once only the answer-failure page did)."""
    run_id = failed_run(world)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        attempt = journal(saver).claim("charge:1", "charge", "hash", 30.0, None)
        assert attempt == 1
        journal(saver).mark_unknown(
            "charge:1",
            attempt,
            error_type="ReadTimeout",
            error_message="timed out: POST https://api:sk_live_TOKEN@payments.example/charge",
        )
    for path in ("/console/runs", f"/console/runs/{run_id}", "/console/effects"):
        page = ana.get(path)
        assert page.status_code == 200, page.text
        for secret in (SECRET, "sk_live_TOKEN", "/books", "/charge"):
            assert secret not in page.text, (path, secret)
    assert "postgresql://***@ledger.internal/…" in ana.get("/console/runs").text
    assert "password=***" in ana.get(f"/console/runs/{run_id}").text
    assert "https://***@payments.example/…" in ana.get("/console/effects").text


class Asks(TypedDict, total=False):
    item: str
    approval: dict[str, Any]
    approval_outcome: str


MIXED = {1: "one", "two": 2}
"""A payload with keys of two types: `json.dumps(sort_keys=True)` cannot sort them."""


def mixed_keys_approval() -> StateGraph[Any]:
    builder: StateGraph[Any] = StateGraph(Asks)
    builder.add_node("ship", lambda state: {"item": "shipped"})
    builder.add_edge(START, "ship")
    builder.add_edge("ship", END)
    add_approval_before(builder, "ship", request=lambda s: MIXED)
    return builder


def asking(value: Any) -> StateGraph[Any]:
    """A graph whose one node asks a plain `interrupt(value)`."""

    def ask(state: Asks) -> Asks:
        interrupt(value)
        return {}

    builder: StateGraph[Any] = StateGraph(Asks)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


def invoke(dsn: str, builder: StateGraph[Any], thread: str) -> None:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        builder.compile(checkpointer=saver).invoke(
            {"item": "x"}, {"configurable": {"thread_id": thread}}
        )


def test_a_payload_with_int_and_str_keys_is_shown_and_answered(world: str) -> None:
    """Its question token once hashed the payload as sorted JSON, which raises on such
    keys: the inbox and the thread's page were a 500."""
    invoke(world, asking(MIXED), "mixed-plain")
    invoke(world, mixed_keys_approval(), "mixed-approval")

    def graphs(saver: Any) -> list[Any]:
        return [mixed_keys_approval().compile(checkpointer=saver)]

    for ana in client_for(world, "manager-ana", graphs=graphs):
        inbox = ana.get("/console/")
        assert inbox.status_code == 200, inbox.text
        assert html.unescape(inbox.text).count('"two": 2') == 2
        assert "asked by a plain interrupt()" in approval_page(ana, "mixed-plain")
        fields = form_fields(approval_page(ana, "mixed-approval"))
        done = answer(ana, fields, action="approve")
        assert done.headers["location"] == "/console/?notice=answered", done.text
    assert waiting(world, "mixed-approval") == 0


def test_a_question_holding_the_applications_own_types_is_shown_without_its_code(
    world: str, ana: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox loaded questions with the saver's strict serializer, which refuses a type
    the console has not imported: the whole inbox was a 500. Read-only pages need only the
    database, so it is shown by its stored fields, as on the thread's page, and still
    known for an approval, under its interrupt id."""
    app, _ = application_graph(tmp_path, monkeypatch)
    module = app.__name__
    deal = app.Deal(name="acme", amount=3)
    invoke(world, asking({"deal": deal}), "app-types")
    approval: StateGraph[Any] = StateGraph(Asks)
    approval.add_node("ship", lambda state: {})
    approval.add_edge(START, "ship")
    approval.add_edge("ship", END)
    add_approval_before(approval, "ship", request=lambda s: {"deal": deal})
    invoke(world, approval, "app-types-approval")
    monkeypatch.delitem(sys.modules, module)  # as in the console's own process
    for page in (ana.get("/console/"), approval_page(ana, "app-types-approval")):
        shown = html.unescape(page if isinstance(page, str) else page.text)
        assert f'"__class__": "{module}.Deal"' in shown
        assert '"name": "acme"' in shown
        assert "Interrupt" not in shown  # the question's own wrapper is not shown as data
    page = approval_page(ana, "app-types-approval")
    assert "Approval requested" in page
    assert re.search(r"interrupt <code>[0-9a-f]{32}</code>", page)
    assert "asked by a plain interrupt()" in approval_page(ana, "app-types")
    assert module not in sys.modules  # shown from the stored fields, never imported


def test_a_question_that_cannot_be_loaded_is_listed_with_why_and_the_rest_answered(
    world: str, example: Any, ana: TestClient
) -> None:
    """One damaged row (or one under a cipher key the console lacks) is listed as
    unreadable with the reason; every other question is shown and answered as before."""
    invoke(world, asking({"item": "x"}), "damaged")
    with psycopg.connect(world, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoint_writes SET blob = '\\xc1c1c1'::bytea "
            "WHERE thread_id = 'damaged' AND channel = '__interrupt__'"
        )
    refund = start_plain(world, example)
    inbox = ana.get("/console/")
    assert inbox.status_code == 200, inbox.text
    assert "This question cannot be shown: " in inbox.text
    assert "nobody here: the question cannot be read" in inbox.text
    assert "you (manager-ana) may answer" in inbox.text  # the refund's
    page = ana.get("/console/approval", params={"thread_id": "damaged"})
    assert page.status_code == 200, page.text
    assert "It cannot be loaded: " in page.text
    assert 'value="approve"' not in page.text
    fields = {
        "csrf_token": csrf_of(page.text),
        "thread": in_form("damaged"),
        "question": tokens_of(world, "damaged")[0],
    }
    refused = answer(ana, fields, action="approve")
    assert refused.status_code == 409, refused.text
    assert "This question cannot be read (" in html.unescape(refused.text)
    done = answer(ana, form_fields(approval_page(ana, refund)), action="approve")
    assert done.headers["location"] == "/console/?notice=answered", done.text


def test_a_run_output_that_cannot_be_loaded_is_named_and_the_run_shown(
    world: str, ana: TestClient
) -> None:
    """The run page loaded the output outside any guard: one that cannot be loaded (a
    cipher key the console lacks, a damaged row) made the whole page an error."""
    builder: StateGraph[Any] = StateGraph(Asks)
    builder.add_node("finish", lambda state: {"item": "done"})
    builder.add_edge(START, "finish")
    builder.add_edge("finish", END)
    with DurablePostgresSaver.from_conn_string(world) as saver:
        version = GraphVersion("done", "1", builder.compile(checkpointer=saver))
        run = RunRegistry(saver).create(version, {"item": "x"}, thread_id="done-1")
        Worker(saver, [version]).run_until_idle()
    shown = ana.get(f"/console/runs/{run.run_id}")
    assert shown.status_code == 200
    assert "&#34;item&#34;: &#34;done&#34;" in shown.text
    with psycopg.connect(world, autocommit=True) as conn:
        conn.execute(
            "UPDATE langgraph_durable_runs SET output = '\\xc1'::bytea WHERE run_id = %s",
            (run.run_id,),
        )
    page = ana.get(f"/console/runs/{run.run_id}")
    assert page.status_code == 200, page.text
    assert "The output cannot be shown: ValueError" in page.text
    assert 'id="status">success<' in page.text
