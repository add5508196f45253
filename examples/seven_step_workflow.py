"""Seven steps, one SIGKILL, no second charge and no second deal: crash and resume you can watch.

    python examples/seven_step_workflow.py                 # embedded Postgres, nothing to set up
    LANGGRAPH_DURABLE_DSN=postgresql://... python examples/seven_step_workflow.py --mode sync
    LANGGRAPH_DURABLE_CHAT_MODEL=openai:gpt-4o-mini python examples/seven_step_workflow.py

A sales workflow: (1) fetch the account, (2) ask a model to qualify the lead, (3) search the
playbooks, (4) create a deal in the CRM, (5) create a task for the account's manager,
(6) ask the model to draft a note, (7) notify the manager. A worker process runs it; when it
reaches step 7 it writes a marker row and this process SIGKILLs it (no cleanup, like an OOM
kill). A new worker process resumes the thread, and the report shows what the outside world
saw: the model provider's bill, the CRM's deals and tasks, the notifications.

The default durability is "exit", the fastest mode and the one where a crash loses the most:
no checkpoint was saved, so the new worker sends the same input again and all seven steps
run again. The effect journal is what makes that safe: the model calls and the CRM writes
are replayed from it (the tokens are not paid again), and only step 7 acts. With
`--mode sync` the checkpointer resumes at step 7 and nothing before it runs again.

The model is a fake chat model reporting `usage_metadata` (`_fakes.py`); set
`LANGGRAPH_DURABLE_CHAT_MODEL` to a `provider:model` string for langchain's
`init_chat_model` to use a real one. Exit code 0 means every claim of the report held.

Subcommands, each its own process, for notebooks and scripts: `story` (the default),
`setup`, `worker [--stop-before STEP]` and `report` (JSON).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, cast
from uuid import UUID

import psycopg
from _fakes import ScriptedChatModel
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.outputs import LLMResult
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import Durability, DurableError, DurablePostgresSaver, Reconciled, effect
from langgraph_durable.effects.llm import JournaledChatModel, token_ledger
from langgraph_durable.embedded import demo_database, demo_note

STEPS = [
    "fetch_account",
    "qualify",
    "search",
    "create_deal",
    "create_task",
    "draft_note",
    "notify",
]
MODEL_STEPS = {"qualify", "draft_note"}
READ_STEPS = {"fetch_account", "search"}
RECEIVERS = {"create_deal": "crm.deals", "create_task": "crm.tasks", "notify": "mailer"}
MODEL_ENV = "LANGGRAPH_DURABLE_CHAT_MODEL"
HOLD_LIMIT_S = 120.0  # a held worker whose parent never kills it gives up after this
EXIT_NOT_KILLED = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS seven_accounts (
    account_id TEXT PRIMARY KEY, name TEXT NOT NULL, industry TEXT NOT NULL,
    amount INT NOT NULL, manager TEXT NOT NULL, notes TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_playbooks (id SERIAL PRIMARY KEY, title TEXT, body TEXT);
CREATE TABLE IF NOT EXISTS seven_crm_deals (
    id SERIAL PRIMARY KEY, external_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,
    account_id TEXT NOT NULL, amount INT NOT NULL, pid INT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_crm_tasks (
    id SERIAL PRIMARY KEY, external_id TEXT NOT NULL UNIQUE, thread_id TEXT NOT NULL,
    assignee TEXT NOT NULL, title TEXT NOT NULL, pid INT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_notifications (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, recipient TEXT NOT NULL,
    body TEXT NOT NULL, pid INT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_receiver_calls (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, receiver TEXT NOT NULL,
    key TEXT NOT NULL, pid INT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_model_bill (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, step TEXT NOT NULL, pid INT NOT NULL,
    input_tokens INT NOT NULL, output_tokens INT NOT NULL, total_tokens INT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_step_runs (
    id SERIAL PRIMARY KEY, thread_id TEXT NOT NULL, step TEXT NOT NULL, pid INT NOT NULL);
CREATE TABLE IF NOT EXISTS seven_markers (
    thread_id TEXT NOT NULL, marker TEXT NOT NULL, pid INT NOT NULL);
INSERT INTO seven_accounts VALUES
    ('acme-001', 'Acme Freight', 'logistics', 42000, 'manager-ana',
     'Wants route planning for 40 trucks; budget approved; decides in Q3.')
    ON CONFLICT (account_id) DO NOTHING;
INSERT INTO seven_playbooks (id, title, body) VALUES
    (1, 'Fleet pilots', 'Logistics buyers sign after a two-week pilot on ten trucks.'),
    (2, 'Retail seasons', 'Retail buyers freeze spending from November to January.'),
    (3, 'Logistics pricing', 'Price logistics deals per vehicle, with a yearly commitment.')
    ON CONFLICT (id) DO NOTHING;
"""
ANSWERS = {
    "qualify": "Qualified: budget approved, 40 trucks, decision in Q3. Offer a pilot.",
    "draft": "Ana, Acme Freight is qualified: deal and follow-up task are in the CRM. "
    "Suggest a two-week pilot on ten trucks, priced per vehicle.",
}


class Deal(TypedDict, total=False):
    account_id: str
    account: dict[str, Any]
    qualification: str
    playbooks: list[str]
    deal: dict[str, Any]
    task: dict[str, Any]
    note: str
    notification: dict[str, Any]


def db(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def setup(dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with db(dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('seven_step_workflow'))")
        conn.execute(SCHEMA)


# -- the model, with the provider's bill as a table -----------------------------------------


class ProviderBill(BaseCallbackHandler):
    """Writes every model call that reaches the provider, with its tokens, to a table."""

    def __init__(self, dsn: str, thread: str) -> None:
        self.dsn = dsn
        self.thread = thread
        self.steps: dict[UUID, str] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.steps[run_id] = str((metadata or {}).get("langgraph_node", "?"))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        message = getattr(response.generations[0][0], "message", None)
        usage = dict(getattr(message, "usage_metadata", None) or {})
        with db(self.dsn) as conn:
            conn.execute(
                "INSERT INTO seven_model_bill (thread_id, step, pid, input_tokens, "
                "output_tokens, total_tokens) VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    self.thread,
                    self.steps.pop(run_id, "?"),
                    os.getpid(),
                    usage.get("input_tokens", 0),
                    usage.get("output_tokens", 0),
                    usage.get("total_tokens", 0),
                ),
            )


def chat_model(callbacks: list[BaseCallbackHandler]) -> BaseChatModel:
    """The fake model, or a real one named by LANGGRAPH_DURABLE_CHAT_MODEL."""
    spec = os.environ.get(MODEL_ENV)
    if not spec:
        return ScriptedChatModel(answers=ANSWERS, callbacks=callbacks)
    try:
        init_chat_model = importlib.import_module("langchain.chat_models").init_chat_model
    except ImportError as exc:
        raise SystemExit(
            f"{MODEL_ENV}={spec} needs langchain's init_chat_model: "
            "pip install langchain and the provider's package (e.g. langchain-openai), "
            f"or unset {MODEL_ENV} to use the fake model."
        ) from exc
    try:
        model: BaseChatModel = init_chat_model(spec, callbacks=callbacks)
    except (ImportError, ValueError) as exc:
        raise SystemExit(f"{MODEL_ENV}={spec}: {exc}") from exc
    return model


# -- the workflow ----------------------------------------------------------------------------


def build(dsn: str, thread: str, stop_before: str | None) -> StateGraph[Any, Any, Any, Any]:
    llm = JournaledChatModel(chat_model([ProviderBill(dsn, thread)]), name="llm:sales")

    def receiver_call(conn: psycopg.Connection[Any], receiver: str, key: str) -> None:
        conn.execute(
            "INSERT INTO seven_receiver_calls (thread_id, receiver, key, pid) "
            "VALUES (%s, %s, %s, %s)",
            (thread, receiver, key, os.getpid()),
        )

    @effect(name="crm.create_deal", retry="idempotent")
    def create_deal_in_crm(account_id: str, amount: int, idempotency_key: str = "") -> Any:
        """The CRM honours the key: it is the deal's UNIQUE external_id."""
        with db(dsn) as conn, conn.transaction():
            receiver_call(conn, "crm.deals", idempotency_key)
            conn.execute(
                "INSERT INTO seven_crm_deals (external_id, thread_id, account_id, amount, pid) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (external_id) DO NOTHING",
                (idempotency_key, thread, account_id, amount, os.getpid()),
            )
            row = conn.execute(
                "SELECT id FROM seven_crm_deals WHERE external_id = %s", (idempotency_key,)
            ).fetchone()
        assert row is not None
        return {"deal_id": row[0], "external_id": idempotency_key}

    def find_task(idempotency_key: str, assignee: str, title: str) -> Reconciled:
        with db(dsn) as conn:
            row = conn.execute(
                "SELECT id FROM seven_crm_tasks WHERE external_id = %s", (idempotency_key,)
            ).fetchone()
        return Reconciled.completed({"task_id": row[0]}) if row else Reconciled.absent()

    @effect(name="crm.create_task", reconcile=find_task)
    def create_task_in_crm(assignee: str, title: str, idempotency_key: str = "") -> Any:
        """Tasks carry the key too; an unknown outcome is settled by looking it up."""
        with db(dsn) as conn, conn.transaction():
            receiver_call(conn, "crm.tasks", idempotency_key)
            row = conn.execute(
                "INSERT INTO seven_crm_tasks (external_id, thread_id, assignee, title, pid) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (idempotency_key, thread, assignee, title, os.getpid()),
            ).fetchone()
        assert row is not None
        return {"task_id": row[0]}

    @effect(name="mailer.send")
    def send_notification(recipient: str, body: str) -> Any:
        """The mailer knows nothing of keys: every call is a new notification."""
        with db(dsn) as conn, conn.transaction():
            receiver_call(conn, "mailer", "-")
            row = conn.execute(
                "INSERT INTO seven_notifications (thread_id, recipient, body, pid) "
                "VALUES (%s, %s, %s, %s) RETURNING id",
                (thread, recipient, body, os.getpid()),
            ).fetchone()
        assert row is not None
        return {"notification_id": row[0]}

    def started(step: str) -> None:
        with db(dsn) as conn:
            conn.execute(
                "INSERT INTO seven_step_runs (thread_id, step, pid) VALUES (%s, %s, %s)",
                (thread, step, os.getpid()),
            )
            if step == stop_before:
                conn.execute(
                    "INSERT INTO seven_markers VALUES (%s, %s, %s)",
                    (thread, f"before {step}", os.getpid()),
                )
        if step == stop_before:  # the parent sees the marker and SIGKILLs this process
            threading.Event().wait(HOLD_LIMIT_S)
            os._exit(EXIT_NOT_KILLED)

    def fetch_account(state: Deal) -> Deal:
        started("fetch_account")
        with db(dsn) as conn:
            cur = conn.execute(
                "SELECT account_id, name, industry, amount, manager, notes "
                "FROM seven_accounts WHERE account_id = %s",
                (state["account_id"],),
            )
            names = [c.name for c in cur.description or []]
            row = cur.fetchone()
        if row is None:
            raise ValueError(f"no account {state['account_id']}")
        return {"account": dict(zip(names, row, strict=True))}

    def qualify(state: Deal) -> Deal:
        started("qualify")
        account = state["account"]
        prompt = f"Qualify this lead: {account['name']} ({account['industry']}). {account['notes']}"
        return {"qualification": str(llm.invoke([HumanMessage(prompt)]).content)}

    def search(state: Deal) -> Deal:
        started("search")
        with db(dsn) as conn:
            rows = conn.execute(
                "SELECT title FROM seven_playbooks WHERE to_tsvector('english', title || ' ' "
                "|| body) @@ plainto_tsquery('english', %s) ORDER BY id",
                (state["account"]["industry"],),
            ).fetchall()
        return {"playbooks": [r[0] for r in rows]}

    def create_deal(state: Deal) -> Deal:
        started("create_deal")
        account = state["account"]
        return {"deal": create_deal_in_crm(account["account_id"], account["amount"])}

    def create_task(state: Deal) -> Deal:
        started("create_task")
        title = f"Follow up on deal {state['deal']['deal_id']} ({state['account']['name']})"
        return {"task": create_task_in_crm(state["account"]["manager"], title)}

    def draft_note(state: Deal) -> Deal:
        started("draft_note")
        prompt = (
            f"Draft a two-line note to {state['account']['manager']} about deal "
            f"{state['deal']['deal_id']}. Qualification: {state['qualification']} "
            f"Playbooks: {', '.join(state['playbooks'])}."
        )
        return {"note": str(llm.invoke([HumanMessage(prompt)]).content)}

    def notify(state: Deal) -> Deal:
        started("notify")
        return {"notification": send_notification(state["account"]["manager"], state["note"])}

    builder = StateGraph(Deal)
    previous = START
    for step, node in zip(
        STEPS,
        [fetch_account, qualify, search, create_deal, create_task, draft_note, notify],
        strict=True,
    ):
        builder.add_node(step, node)
        builder.add_edge(previous, step)
        previous = step
    builder.add_edge(previous, END)
    return builder


def worker(dsn: str, thread: str, mode: Durability, stop_before: str | None) -> dict[str, Any]:
    """Run the thread to the end: from its checkpoint if there is one, else from the input."""
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        graph = build(dsn, thread, stop_before).compile(checkpointer=saver)
        state = graph.get_state(config)
        if state.created_at is not None and not state.tasks:  # it finished: do not run again
            return {"pid": os.getpid(), "started_from": "finished", **state.values}
        resume = bool(state.tasks)  # stopped mid-run: go on from there
        payload = None if resume else {"account_id": "acme-001"}
        final = graph.invoke(payload, config, durability=mode)
    return {"pid": os.getpid(), "started_from": "checkpoint" if resume else "input", **final}


# -- what the outside world saw --------------------------------------------------------------


def collect(dsn: str, thread: str) -> dict[str, Any]:
    """Every table outside the graph, for one thread, plus the token ledger."""
    found: dict[str, Any] = {"thread": thread}
    with db(dsn) as conn:
        for name, query in {
            "step_runs": "SELECT step, pid FROM seven_step_runs WHERE thread_id = %s ORDER BY id",
            "receiver_calls": "SELECT receiver, pid FROM seven_receiver_calls "
            "WHERE thread_id = %s ORDER BY id",
            "model_bill": "SELECT step, pid, total_tokens FROM seven_model_bill "
            "WHERE thread_id = %s ORDER BY id",
            "deals": "SELECT id, pid FROM seven_crm_deals WHERE thread_id = %s ORDER BY id",
            "tasks": "SELECT id, pid FROM seven_crm_tasks WHERE thread_id = %s ORDER BY id",
            "notifications": "SELECT id, pid FROM seven_notifications "
            "WHERE thread_id = %s ORDER BY id",
        }.items():
            found[name] = [list(r) for r in conn.execute(query, (thread,)).fetchall()]
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        found["ledger"] = token_ledger(saver, thread)
    return found


def describe(found: dict[str, Any], step: str, pid: int) -> str:
    """What one worker did in one step, as the outside world saw it."""
    ran = [step, pid] in found["step_runs"]
    again = ran and [p for s, p in found["step_runs"] if s == step].index(pid) > 0
    billed = sum(t for s, p, t in found["model_bill"] if s == step and p == pid)
    called = [found["receiver_calls"].count([RECEIVERS[step], pid])] if step in RECEIVERS else []
    if not ran:
        return "-  (in the checkpoint)"
    if step in MODEL_STEPS:
        return f"billed {billed} tokens" if billed else "replayed from the journal"
    if step in READ_STEPS:
        return "ran again (a read)" if again else "ran"
    if called == [0]:
        return "killed before sending" if step == "notify" else "replayed (receiver not called)"
    made = {"create_deal": "deals", "create_task": "tasks", "notify": "notifications"}[step]
    ids = [str(i) for i, p in found[made] if p == pid]
    return f"{made[:-1]} #{', #'.join(ids)} created" if ids else "receiver called, nothing new"


def check(found: dict[str, Any], first: int, second: int, mode: str) -> dict[str, bool]:
    """The claims of the story, each true or false."""
    reran = [s for s in STEPS[:-1] if [s, second] in found["step_runs"]]
    saved_expected = sum(t for s, p, t in found["model_bill"] if p == first and s in reran)
    claims = {
        "the first worker ran steps 1-6": all([s, first] in found["step_runs"] for s in STEPS[:-1]),
        "no model call billed after the crash": all(p != second for _, p, _ in found["model_bill"]),
        "tokens saved = tokens of the replayed model calls": (
            found["ledger"]["saved_total_tokens"] == saved_expected
        ),
        "one deal, one task, one notification": (
            len(found["deals"]) == len(found["tasks"]) == len(found["notifications"]) == 1
        ),
        "each receiver called once": sorted(r for r, _ in found["receiver_calls"])
        == sorted(RECEIVERS.values()),
        "the notification came from the resumed worker": [n[1] for n in found["notifications"]]
        == [second],
    }
    if mode == "sync":
        claims["nothing before step 7 ran again"] = reran == []
    if mode == "exit":
        claims["every step ran again, model tokens saved"] = (
            reran == STEPS[:-1] and saved_expected > 0
        )
    return claims


def print_report(found: dict[str, Any], first: int, second: int, mode: str) -> bool:
    print(f"\n{'step':<16}{f'worker {first} (killed)':<30}worker {second} (resumed)")
    for number, step in enumerate(STEPS, 1):
        print(
            f"{f'{number} {step}':<16}{describe(found, step, first):<30}"
            f"{describe(found, step, second)}"
        )
    ledger = found["ledger"]
    billed_after = sum(t for _, p, t in found["model_bill"] if p == second)
    print(
        f"\nmodel: {ledger['calls']} calls paid for ({ledger['total_tokens']} tokens), "
        f"{billed_after} tokens billed after the crash, "
        f"{ledger['saved_total_tokens']} tokens saved by {ledger['replays']} replays"
    )
    print(
        f"side effects the outside world saw: {len(found['deals'])} deal, "
        f"{len(found['tasks'])} task, {len(found['notifications'])} notification"
    )
    claims = check(found, first, second, mode)
    for claim, held in claims.items():
        print(f"  [{'ok' if held else 'FAILED'}] {claim}")
    ok = all(claims.values())
    print(f"all claims hold: {'yes' if ok else 'NO'}")
    return ok


def wait_for_marker(
    dsn: str, thread: str, marker: str, proc: subprocess.Popen[Any], timeout: float = 60
) -> None:
    """Block until the worker wrote `marker` (it then waits to be killed)."""
    deadline = time.monotonic() + timeout
    with db(dsn) as conn:
        while time.monotonic() < deadline:
            query = "SELECT 1 FROM seven_markers WHERE thread_id = %s AND marker = %s"
            if conn.execute(query, (thread, marker)).fetchone():
                return
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited ({proc.returncode}) before {marker!r}")
            time.sleep(0.02)
    proc.kill()
    raise TimeoutError(f"the worker never reached {marker!r}")


def story(dsn: str, where: str, mode: str) -> int:
    setup(dsn)
    thread = f"deal-{uuid.uuid4().hex[:8]}"
    me = [sys.executable, __file__, "--thread", thread, "--mode", mode]  # DSN: from the env
    print(f'thread {thread} on {where}, durability="{mode}"')
    first = subprocess.Popen([*me, "worker", "--stop-before", "notify"])
    wait_for_marker(dsn, thread, "before notify", first)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    print(f"worker {first.pid} ran steps 1-6 and was SIGKILLed before step 7 (notify)")
    done = subprocess.run([*me, "worker"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return 1
    final = json.loads(done.stdout.strip().splitlines()[-1])
    second = int(final["pid"])
    how = {
        "checkpoint": "resumed from the last checkpoint",
        "input": f'found no checkpoint (durability="{mode}" had not saved one) '
        "and sent the same input again",
    }[final["started_from"]]
    print(f"worker {second} {how}")
    ok = print_report(collect(dsn, thread), first.pid, second, mode)
    ok = ok and first.returncode == -signal.SIGKILL
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--mode", default="exit", choices=["sync", "async", "exit"])
    parser.add_argument("--thread")
    parser.add_argument("--stop-before", choices=STEPS)
    commands = ["story", "setup", "worker", "report"]
    parser.add_argument("command", nargs="?", default="story", choices=commands)
    args = parser.parse_args()
    dsn, embedded = demo_database(args.dsn)
    try:
        if args.command == "story":
            print(demo_note(embedded))
            where = "embedded Postgres" if embedded else "your Postgres"
            return story(dsn, where, args.mode)
        if args.command == "setup":
            setup(dsn)
        elif args.command == "worker":
            final = worker(dsn, args.thread, cast(Durability, args.mode), args.stop_before)
            print(json.dumps(final), flush=True)
        elif args.command == "report":
            print(json.dumps(collect(dsn, args.thread)))
        return 0
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DurableError as exc:  # a database the demo cannot use: one line, no traceback
        sys.exit(f"error: {exc}")
