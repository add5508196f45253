"""What the console's pages show of stored values and errors: never a password, and one
value that cannot be shown never takes a whole page down."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from starlette.testclient import TestClient
from test_console_effects import journal
from typing_extensions import TypedDict

from langgraph_durable import DurablePostgresSaver, GraphVersion, RunRegistry, Worker

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
