"""A least-privilege role runs the product and cannot change the schema (issue 15, item 7).

The owner (the test server's superuser here) runs `setup()` and `grant_app_role`; every
test then connects as a fresh LOGIN role that holds only those grants. Roles are
cluster-wide, so each test makes one with a random name and drops it afterwards.
"""

from __future__ import annotations

import json
import operator
import secrets
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import psycopg.errors
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    ConfigurationError,
    DatabaseUnreachableError,
    DurablePostgresSaver,
    EffectJournal,
    GraphVersion,
    RunRegistry,
    RunStatus,
    SchemaNotReadyError,
    Worker,
    app_role_sql,
    effect,
    grant_app_role,
    revoke_app_role,
)
from langgraph_durable.cli import main


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: Any


def as_user(dsn: str, user: str) -> str:
    params = conninfo_to_dict(dsn)
    params["user"] = user
    params.pop("password", None)
    return make_conninfo("", **params)


def execute(dsn: str, statement: sql.Composable | str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


@pytest.fixture
def owner_dsn(fresh_db_dsn: str) -> str:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    return fresh_db_dsn


@pytest.fixture
def role(pg_server_dsn: str, fresh_db_dsn: str) -> Iterator[str]:
    """A LOGIN role with nothing granted yet; dropped after the test."""
    name = f"lgd_app_{secrets.token_hex(4)}"
    execute(pg_server_dsn, sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        # DROP OWNED also revokes what the role was granted in this database.
        execute(fresh_db_dsn, sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        execute(pg_server_dsn, sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def app_dsn(owner_dsn: str, role: str) -> str:
    grant_app_role(owner_dsn, role)
    return as_user(owner_dsn, role)


def test_the_app_role_runs_graphs_effects_approvals_and_runs(app_dsn: str) -> None:
    calls: list[str] = []
    name = f"refund-{uuid.uuid4().hex[:6]}"

    @effect(name=name, key=lambda amount: f"refund:{amount}")
    def refund(amount: int) -> str:
        calls.append(f"refund {amount}")
        return f"refunded {amount}"

    with DurablePostgresSaver.from_conn_string(app_dsn) as saver:
        assert saver.setup() == []  # up to date: it only reads the versions
        saver.check_schema()
        builder = StateGraph(State)
        builder.add_node("ask", lambda s: {"answer": interrupt("refund 30?")})
        builder.add_node("pay", lambda s: {"log": [refund(30)]})
        builder.add_edge(START, "ask")
        builder.add_edge("ask", "pay")
        builder.add_edge("pay", END)
        graph = GraphVersion(f"g-{uuid.uuid4().hex[:8]}", "1", builder.compile(saver))
        runs = RunRegistry(saver)
        worker = Worker(saver, [graph])

        run = runs.create(graph, {"log": []})
        (waiting,) = worker.run_until_idle()
        assert waiting.status is RunStatus.INTERRUPTED
        runs.resume(run.run_id, Command(resume="yes"))
        (done,) = worker.run_until_idle()
        assert done.status is RunStatus.SUCCESS
        assert runs.output_of(done) == {"log": ["refunded 30"], "answer": "yes"}
        assert calls == ["refund 30"]

        # The journal's operator paths, and the saver's reads and deletes.
        journal = EffectJournal(saver.conn)
        assert journal.open_effects(run.thread_id) == []
        config: RunnableConfig = {"configurable": {"thread_id": run.thread_id}}
        assert saver.get_tuple(config) is not None
        assert list(saver.list(config))
        saver.prune([run.thread_id])
        saver.delete_thread(run.thread_id)
        assert saver.get_tuple(config) is None


async def test_the_app_role_runs_the_async_saver(app_dsn: str) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(app_dsn) as saver:
        assert await saver.setup() == []
        builder = StateGraph(State)
        builder.add_node("a", lambda s: {"log": ["a"]})
        builder.add_edge(START, "a")
        builder.add_edge("a", END)
        graph = builder.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": f"t-{uuid.uuid4()}"}}
        assert await graph.ainvoke({"log": []}, config, durability="sync") == {"log": ["a"]}
        assert (await graph.aget_state(config)).values == {"log": ["a"]}
        await saver.adelete_thread(config["configurable"]["thread_id"])


DDL = {
    "drop table": "DROP TABLE checkpoints",
    "alter table": "ALTER TABLE checkpoints ADD COLUMN evil INTEGER",
    "create index": "CREATE INDEX evil_idx ON checkpoints (thread_id)",
    "drop index": "DROP INDEX lgd_checkpoints_thread_id_checkpoint_id_idx",
    "truncate": "TRUNCATE langgraph_durable_effects",
    "create table": "CREATE TABLE evil (x INTEGER)",
    "create schema": "CREATE SCHEMA evil",
    "alter schema": "ALTER SCHEMA public RENAME TO evil",
    "record a migration": "INSERT INTO langgraph_durable_migrations (v, name) VALUES (99, 'x')",
    "forget a migration": "DELETE FROM checkpoint_migrations",
}


@pytest.mark.parametrize("what", list(DDL))
def test_the_app_role_cannot_change_the_schema(app_dsn: str, what: str) -> None:
    with (
        psycopg.connect(app_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(DDL[what])


def test_the_app_role_cannot_migrate(owner_dsn: str, app_dsn: str) -> None:
    """A database behind this version (an upgrade) needs the owner: a named error."""
    execute(owner_dsn, "DELETE FROM langgraph_durable_migrations WHERE v >= 5")
    execute(owner_dsn, "DROP TABLE langgraph_durable_workers")
    with (
        DurablePostgresSaver.from_conn_string(app_dsn) as saver,
        pytest.raises(SchemaNotReadyError, match="as the owner"),
    ):
        saver.setup()


def test_grant_refuses_a_missing_role_or_schema_by_name(owner_dsn: str) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        grant_app_role(owner_dsn, f"lgd_missing_{secrets.token_hex(4)}")


def test_grant_before_setup_says_to_run_setup(fresh_db_dsn: str, role: str) -> None:
    with pytest.raises(SchemaNotReadyError, match="setup"):
        grant_app_role(fresh_db_dsn, role)


def test_only_the_owner_can_grant(app_dsn: str, role: str) -> None:
    with pytest.raises(ConfigurationError, match="owner"):
        grant_app_role(app_dsn, role)


def test_grant_on_a_server_that_cannot_be_reached_is_named_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = "postgresql://owner:pw-never-shown@127.0.0.1:1/app"  # nothing listens on port 1
    with pytest.raises(DatabaseUnreachableError, match=r"127\.0\.0\.1:1/app") as raised:
        grant_app_role(dsn, "app_worker")
    assert "pw-never-shown" not in str(raised.value)
    assert main(["--dsn", dsn, "grant", "app_worker"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Could not connect to Postgres at 127.0.0.1:1/app")
    assert "pw-never-shown" not in err


def test_the_outbox_commands_name_a_missing_grant(
    owner_dsn: str, app_dsn: str, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An application role granted before the outbox tables existed (or revoked since):
    the outbox commands say what to run, like every other command, with no traceback."""
    execute(
        owner_dsn,
        sql.SQL("REVOKE ALL ON TABLE langgraph_durable_outbox FROM {}").format(
            sql.Identifier(role)
        ),
    )
    for command in (["backlog"], ["dead"], ["replay"], ["prune", "--older-than", "1d"]):
        assert main(["--dsn", app_dsn, "outbox", *command]) == 1, command
        err = capsys.readouterr().err
        assert err.startswith("error: This database role may not do"), (command, err)
        assert "langgraph-durable grant" in err


def test_the_cli_grants_and_prints_the_statements(
    owner_dsn: str, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grant", role, "--print"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == app_role_sql(role)
    assert f'TO "{role}"' in printed
    assert main(["--dsn", owner_dsn, "--json", "grant", role]) == 0
    assert role in capsys.readouterr().out
    with psycopg.connect(as_user(owner_dsn, role)) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
    assert main(["--dsn", owner_dsn, "grant", "lgd_no_such_role_x"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_revoke_takes_the_grants_back(owner_dsn: str, app_dsn: str, role: str) -> None:
    revoke_app_role(owner_dsn, role)
    with (
        psycopg.connect(app_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT count(*) FROM checkpoints")
    # What the saver says to a role without its grants.
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with (
        DurablePostgresSaver.from_conn_string(app_dsn) as saver,
        pytest.raises(ConfigurationError, match="langgraph-durable grant ROLE"),
    ):
        saver.get_tuple(config)


async def test_the_app_role_emits_and_relays_outbox_events(app_dsn: str) -> None:
    from langgraph_durable.outbox import OutboxRelay, emit_txn
    from langgraph_durable.outbox.publishers import CallbackPublisher

    with psycopg.connect(app_dsn, autocommit=True) as conn, conn.transaction():
        event_id = emit_txn(conn, "role.event", {"n": 1}, key="k")
    seen: list[str] = []
    relay = OutboxRelay(app_dsn, CallbackPublisher(lambda event: seen.append(event.event_id)))
    try:
        assert (await relay.run_once()).published == 1
    finally:
        await relay.aclose()
    assert seen == [str(event_id)]


def test_doctor_fails_a_role_without_a_privilege_runs_need(
    app_dsn: str, owner_dsn: str, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every run of this role would fail with `permission denied` at its first write."""

    def privileges() -> tuple[int, dict[str, Any]]:
        capsys.readouterr()
        code = main(["--json", "--dsn", app_dsn, "doctor"])
        report = json.loads(capsys.readouterr().out)
        return code, {f["check"]: f for f in report["findings"]}["privileges"]

    assert privileges()[1]["level"] == "ok"
    execute(
        owner_dsn,
        sql.SQL("REVOKE INSERT ON checkpoint_writes FROM {}").format(sql.Identifier(role)),
    )
    code, found = privileges()
    assert code == 1
    assert (found["level"], found["seen"]) == ("fail", f"{role} lacks checkpoint_writes INSERT")
    assert f"langgraph-durable grant {role}" in found["advice"]
