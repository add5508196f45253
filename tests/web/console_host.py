"""A host application for the console tests: its own sign-in, the console mounted inside.

This is what a user does: their app signs people in (here a cookie set by a login form,
standing in for real sign-in), and `authenticate` tells the console who the request is.
The Northwind graph is the example's, compiled with the async saver the app opens.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from langgraph.graph import END, START, StateGraph
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from typing_extensions import TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, GraphVersion
from langgraph_durable.approvals import ApprovalDecision, add_approval_before, approval_node
from langgraph_durable.web import create_app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "northwind_refund.py"
USER_COOKIE = "demo_user"
SECRET = "test-secret"


def northwind() -> ModuleType:
    spec = importlib.util.spec_from_file_location("northwind_refund_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    found = sys.modules.get(spec.name)
    if found is not None:
        return found
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its TypedDict's annotations are resolved by name
    spec.loader.exec_module(module)
    return module


def user_of(request: Request) -> str | None:
    return request.cookies.get(USER_COOKIE) or None


async def login_form(request: Request) -> Response:
    return HTMLResponse(
        "<!doctype html><title>Sign in</title><h1>Northwind sign-in</h1>"
        '<form method="post" action="/login"><label>User <input name="user" id="user-name">'
        '</label><button id="sign-in">Sign in</button></form>'
    )


async def login(request: Request) -> Response:
    form = await request.form()
    response = RedirectResponse("/console/", status_code=303)
    response.set_cookie(USER_COOKIE, str(form.get("user") or ""), httponly=True)
    return response


class Recheck(TypedDict, total=False):
    item: str
    approval: dict[str, Any]
    approval_outcome: str


def recheck_builder() -> StateGraph[Any, Any, Any, Any]:
    """A second graph: its revalidate hook wants a new approval unless the comment says
    "really", so the console's answer is judged again by the node and asked again."""

    def revalidate(state: Recheck, decision: ApprovalDecision) -> Any:
        return "proceed" if decision.comment == "really" else "needs_new_approval"

    builder = StateGraph(Recheck)
    builder.add_node("done", lambda state: {"item": state["item"] + " (done)"})
    builder.add_edge(START, "done")
    builder.add_edge("done", END)
    add_approval_before(
        builder, "done", request=lambda s: {"item": s["item"]}, revalidate=revalidate
    )
    return builder


def parallel_builder(sides: tuple[str, ...]) -> StateGraph[Any, Any, Any, Any]:
    """Approvals asked at once, one per side, by parallel nodes, so a thread waits on
    several questions and the page must answer the one its form showed."""
    fields: dict[str, Any] = {"item": str}
    for side in sides:
        fields.update({f"{side}_approval": dict[str, Any], f"{side}_outcome": str})
    builder = StateGraph(TypedDict("Parallel", fields, total=False))
    for side in sides:
        builder.add_node(f"{side}_done", lambda state: {})
        builder.add_edge(START, f"{side}_done")
        builder.add_edge(f"{side}_done", END)
        add_approval_before(
            builder,
            f"{side}_done",
            request=lambda s, side=side: {"item": s["item"], "side": side},
            decision_key=f"{side}_approval",
            outcome_key=f"{side}_outcome",
        )
    return builder


class Sequence(TypedDict, total=False):
    item: str
    first_approval: dict[str, Any]
    first_outcome: str
    second_approval: dict[str, Any]
    second_outcome: str


def sequence_builder() -> StateGraph[Any, Any, Any, Any]:
    """Two approvals one after the other inside a subgraph: both are asked in the one task
    of the parent graph that runs the subgraph, at the same checkpoint of the thread."""
    inner = StateGraph(Sequence)
    for step, then in (("first", "second"), ("second", END)):
        inner.add_node(
            step,
            approval_node(
                request=lambda s, step=step: {"item": s["item"], "step": step},
                on_approve=then,
                on_reject=END,
                decision_key=f"{step}_approval",
                outcome_key=f"{step}_outcome",
            ),
        )
    inner.add_edge(START, "first")
    outer = StateGraph(Sequence)
    outer.add_node("review_in_sequence", inner.compile())
    outer.add_edge(START, "review_in_sequence")
    outer.add_edge("review_in_sequence", END)
    return outer


class Ledger(TypedDict, total=False):
    item: str
    approval: dict[str, Any]
    approval_outcome: str


LEDGER_ERROR = (
    "the ledger refused the entry: postgresql://ledger:s3cret-pw@ledger.internal/books "
    "password=s3cret-pw " + "and so on " * 100
)


def failing_builder() -> StateGraph[Any, Any, Any, Any]:
    """A third graph: the node after its approval fails, quoting a DSN with a password."""

    def post_to_ledger(state: Ledger) -> Ledger:
        raise RuntimeError(LEDGER_ERROR)

    builder = StateGraph(Ledger)
    builder.add_node("post_to_ledger", post_to_ledger)
    builder.add_edge(START, "post_to_ledger")
    builder.add_edge("post_to_ledger", END)
    add_approval_before(builder, "post_to_ledger", request=lambda s: {"item": s["item"]})
    return builder


def directory_builder() -> StateGraph[Any, Any, Any, Any]:
    """A fourth graph: its authorize hook asks a staff directory that is down (it raises)."""

    def authorize(state: Ledger, decision: ApprovalDecision) -> bool:
        raise LookupError("the staff directory is down")

    builder = StateGraph(Ledger)
    builder.add_node("order_supplies", lambda state: {})
    builder.add_edge(START, "order_supplies")
    builder.add_edge("order_supplies", END)
    add_approval_before(
        builder, "order_supplies", request=lambda s: {"item": s["item"]}, authorize=authorize
    )
    return builder


class Tagged(TypedDict, total=False):
    tags: list[str]
    approval: dict[str, Any]
    approval_outcome: str


def tagged_builder() -> StateGraph[Any, Any, Any, Any]:
    """A fifth graph: its question holds a set, whose order as text follows the process's
    string hash seed (`PYTHONHASHSEED`), so two console processes print it apart."""
    builder = StateGraph(Tagged)
    builder.add_node("send", lambda state: {})
    builder.add_edge(START, "send")
    builder.add_edge("send", END)
    add_approval_before(builder, "send", request=lambda s: {"tags": set(s["tags"])})
    return builder


tagged = tagged_builder()
"""For `langgraph-durable web --graph console_host:tagged`."""

PAIR = ("left", "right")
ELEVEN = tuple(f"q{i:02d}" for i in range(11))
"""More questions at once than the console once fetched for a thread (ten)."""


def host_app(
    dsn: str,
    *,
    read_only: bool = False,
    with_auth: bool = True,
    started: threading.Event | None = None,
    may_resolve: Any = None,
    graphs: Callable[[AsyncDurablePostgresSaver], list[Any]] | None = None,
) -> Starlette:
    """The user's app: /login, and the console at /console, opened with the app (given
    `graphs`, the console gets what it makes of the saver instead of the usual ones)."""
    app = Starlette(routes=[Route("/login", login_form), Route("/login", login, methods=["POST"])])
    example = northwind()

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
            graph: Any = example.build(dsn).compile(checkpointer=saver)
            given = [
                GraphVersion("northwind", "1", graph),
                recheck_builder().compile(checkpointer=saver),
                parallel_builder(PAIR).compile(checkpointer=saver),
                parallel_builder(ELEVEN).compile(checkpointer=saver),
                sequence_builder().compile(checkpointer=saver),
                failing_builder().compile(checkpointer=saver),
                directory_builder().compile(checkpointer=saver),
            ]
            console = create_app(
                saver,
                graphs=given if graphs is None else graphs(saver),
                authenticate=user_of if with_auth else None,
                read_only=read_only,
                secret_key=SECRET,
                may_resolve=may_resolve,
            )
            app.router.routes.append(Mount("/console", app=console))
            if started is not None:
                started.set()
            yield

    app.router.lifespan_context = lifespan
    return app


def northwind_version(saver: Any) -> GraphVersion:
    """For `langgraph-durable web --graph console_host:northwind_version` (DSN: env)."""
    dsn = os.environ["LANGGRAPH_DURABLE_DSN"]
    return GraphVersion("northwind", "1", northwind().build(dsn).compile(checkpointer=saver))
