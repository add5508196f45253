"""The operator's commands on a real database: runs, threads, effects, approvals, doctor, db.

Each test runs the real command (`main(argv)`, the function the installed script calls)
and reads what a script reads: the `--json` object and the exit code. Runs are worked by
a real `Worker` in this process; nothing is mocked.
"""

from __future__ import annotations

import json
import operator
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pytest
from _pg import server_has_lz4
from graphs import application_graph
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from test_cli import INTERRUPTED_WAIT
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    RunRegistry,
    RunStatus,
    UnsafeRowError,
    Worker,
    effect,
)
from langgraph_durable.approvals import approval_node
from langgraph_durable.cli import main
from langgraph_durable.cli._output import Progress

MANAGERS = {"dana"}


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    order_id: str
    refund: str
    approval: dict[str, Any]
    approval_outcome: str


def cli(capsys: pytest.CaptureFixture[str], dsn: str, *argv: str) -> tuple[int, Any, str]:
    """Exit code, the `--json` object (None when stdout is empty) and stderr."""
    capsys.readouterr()
    code = main([*argv, "--json", "--dsn", dsn])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


def text(capsys: pytest.CaptureFixture[str], dsn: str, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*argv, "--dsn", dsn])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def simple(saver: DurablePostgresSaver, *, fail: bool = False) -> GraphVersion:
    name = f"cli-{uuid.uuid4().hex[:8]}"

    @effect(name=f"{name}.refund")
    def refund(order_id: str) -> str:
        return f"refund-{order_id}"

    def pay(state: State) -> State:
        if fail:
            raise ValueError("the payment service is down")
        return {"log": ["pay"], "refund": refund(state.get("order_id", "o"))}

    builder = StateGraph(State)
    builder.add_node("check", lambda s: {"log": ["check"]})
    builder.add_node("pay", pay)
    builder.add_edge(START, "check")
    builder.add_edge("check", "pay")
    builder.add_edge("pay", END)
    return GraphVersion(name, "1", builder.compile(checkpointer=saver))


def approving(saver: DurablePostgresSaver) -> GraphVersion:
    builder = StateGraph(State)
    builder.add_node(
        "approve",
        approval_node(
            request=lambda s: {"order": s["order_id"], "amount": 420},
            on_approve="refund",
            on_reject=END,
            authorize=lambda s, d: d.approver in MANAGERS or f"{d.approver} is not a manager",
        ),
    )
    builder.add_node("refund", lambda s: {"log": ["refunded"]})
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    return GraphVersion(
        f"cli-approve-{uuid.uuid4().hex[:6]}", "1", builder.compile(checkpointer=saver)
    )


class Pair(TypedDict, total=False):
    left_approval: dict[str, Any]
    left_outcome: str
    right_approval: dict[str, Any]
    right_outcome: str


def two_at_once(saver: DurablePostgresSaver) -> Any:
    """Two approvals asked at once by parallel nodes; eve may answer neither."""
    builder = StateGraph(Pair)
    for side in ("left", "right"):
        builder.add_node(
            f"approve_{side}",
            approval_node(
                request=lambda s, side=side: {"side": side},
                on_approve=END,
                on_reject=END,
                decision_key=f"{side}_approval",
                outcome_key=f"{side}_outcome",
                authorize=lambda s, d: d.approver != "eve" or "eve may not answer",
            ),
        )
        builder.add_edge(START, f"approve_{side}")
    return builder.compile(checkpointer=saver)


def two_in_a_subgraph(saver: DurablePostgresSaver) -> Any:
    """`two_at_once` as a subgraph: both questions are asked in one task of this graph."""
    builder = StateGraph(Pair)
    builder.add_node("review", two_at_once(None))  # type: ignore[arg-type]
    builder.add_edge(START, "review")
    return builder.compile(checkpointer=saver)


def failing_refund(saver: DurablePostgresSaver) -> Any:
    """An approval whose approved branch raises: the graph fails after the answer."""

    def refund(state: State) -> State:
        raise RuntimeError("warehouse system down")

    builder = StateGraph(State)
    builder.add_node(
        "approve",
        approval_node(request=lambda s: {"amount": 420}, on_approve="refund", on_reject=END),
    )
    builder.add_node("refund", refund)
    builder.add_edge(START, "approve")
    builder.add_edge("refund", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture
def dsn(db_dsn: str, saver: DurablePostgresSaver) -> str:
    return db_dsn


def test_runs_commands_list_show_wait_and_control_runs(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = simple(saver)
    run = runs.create(graph, {"order_id": "8890"})
    code, listed, _ = cli(capsys, dsn, "runs", "list", "--graph", graph.name)
    assert code == 0
    assert [(r["run_id"], r["status"], r["attempt"]) for r in listed["runs"]] == [
        (run.run_id, "pending", 0)
    ]
    assert cli(capsys, dsn, "runs", "wait", run.run_id, "--timeout", "0")[0] == 4

    Worker(saver, [graph]).run_until_idle()
    code, waited, _ = cli(capsys, dsn, "runs", "wait", run.run_id)
    assert (code, waited["run"]["status"]) == (0, "success")
    assert waited["run"]["output"]["refund"] == "refund-8890"
    code, shown, _ = cli(capsys, dsn, "runs", "show", run.run_id)
    assert shown["run"]["input"] == {"order_id": "8890"}
    assert isinstance(shown["run"]["attempt"], int)

    failing = simple(saver, fail=True)
    failed = runs.create(failing, {"order_id": "1"}, max_attempts=1)
    Worker(saver, [failing]).run_until_idle()
    code, waited, _ = cli(capsys, dsn, "runs", "wait", failed.run_id)
    assert (code, waited["run"]["status"]) == (3, "error")
    assert waited["run"]["error_message"] == "the payment service is down"
    code, retried, _ = cli(capsys, dsn, "runs", "retry", failed.run_id)
    assert (code, retried["run"]["status"], retried["run"]["attempt"]) == (0, "pending", 0)
    code, cancelled, _ = cli(capsys, dsn, "runs", "cancel", failed.run_id)
    assert (code, cancelled["run"]["status"]) == (0, "cancelled")
    code, _, err = cli(capsys, dsn, "runs", "cancel", failed.run_id)
    assert code == 1
    assert "cancelled" in err
    code, _, err = cli(capsys, dsn, "runs", "show", "no-such-run")
    assert (code, err.strip()) == (1, "error: No run 'no-such-run' in this database.")
    code, out = text(capsys, dsn, "runs", "list", "--graph", failing.name)
    assert "RUN_ID" in out
    assert failed.run_id in out


def test_workers_and_stuck_list_what_the_registry_knows(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = simple(saver)
    worker = Worker(saver, [graph], name=f"cli-worker-{uuid.uuid4().hex[:6]}")
    worker.run_until_idle()
    code, found, _ = cli(capsys, dsn, "workers")
    mine = [w for w in found["workers"] if w["worker_id"] == worker.worker_id]
    assert code == 0
    assert mine[0]["live"] is True
    assert mine[0]["graphs"][0]["name"] == graph.name
    run = runs.create(graph, {"order_id": "2"})
    claimed = runs.claim([graph], owner="cli-test", lease_seconds=60)
    assert claimed is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE langgraph_durable_runs SET stuck_since = now() WHERE run_id = %s",
            (run.run_id,),
        )
    code, stuck, _ = cli(capsys, dsn, "stuck")
    assert run.run_id in [r["run_id"] for r in stuck["runs"]]


def test_threads_commands_show_history_and_diff(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver
) -> None:
    graph = simple(saver)
    thread = f"cli-thread-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": thread}}
    graph.graph.invoke({"order_id": "77"}, config)
    graph.graph.invoke(None, config)  # nothing left to do: no new step, no repeated effect

    code, listed, _ = cli(capsys, dsn, "threads", "list", "--prefix", thread)
    assert code == 0
    assert [(t["thread_id"], t["step"]) for t in listed["threads"]] == [(thread, 2)]
    code, shown, _ = cli(capsys, dsn, "threads", "show", thread)
    assert shown["values"] == {"log": ["check", "pay"], "order_id": "77", "refund": "refund-77"}

    code, history, _ = cli(capsys, dsn, "threads", "history", thread)
    steps = [(s["step"], s["nodes"], sorted(s["wrote"])) for s in history["steps"]]
    assert steps == [
        (-1, [], []),  # the input, taken in
        (0, ["__start__"], ["order_id"]),
        (1, ["check"], ["log"]),
        (2, ["pay"], ["log", "refund"]),
    ]
    assert [s["source"] for s in history["steps"]] == ["input", "loop", "loop", "loop"]
    (refund,) = history["effects"]
    assert (refund["effect_name"], refund["status"], refund["node"]) == (
        f"{graph.name}.refund",
        "completed",
        "pay",
    )
    assert set(history["tokens"]) >= {"input_tokens", "output_tokens"}
    code, out = text(capsys, dsn, "threads", "history", thread)
    assert f"effect {graph.name}.refund [completed]" in out

    code, diff, _ = cli(capsys, dsn, "threads", "diff", thread)
    assert diff["changed"] == {"log": {"from": ["check"], "to": ["check", "pay"]}}
    assert diff["added"] == {"refund": "refund-77"}
    code, _, err = cli(capsys, dsn, "threads", "history", "no-such-thread")
    assert code == 1
    assert "no checkpoints" in err


def test_threads_holding_the_applications_types_are_shown_without_its_code(
    capsys: pytest.CaptureFixture[str],
    dsn: str,
    saver: DurablePostgresSaver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI runs without the application's modules: its own types are shown as their
    stored fields, where loading them would be refused."""
    app, builder = application_graph(tmp_path, monkeypatch)
    module = app.__name__
    thread = f"cli-app-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": thread}}
    version = GraphVersion(f"app-{module}", "1", builder.compile(checkpointer=saver))
    run = RunRegistry(saver).create(
        version, {"deal": app.Deal(name="a", amount=1)}, thread_id=thread
    )
    Worker(saver, [version]).run_until_idle()
    monkeypatch.delitem(sys.modules, module)  # as in the operator's shell

    deal = {"__class__": f"{module}.Deal", "name": "a", "amount": 2}
    code, shown, err = cli(capsys, dsn, "threads", "show", thread)
    assert (code, err) == (0, "")
    assert shown["values"] == {"deal": deal}
    code, history, _ = cli(capsys, dsn, "threads", "history", thread)
    assert [s["wrote"] for s in history["steps"]][-1] == {"deal": deal}
    code, diff, _ = cli(capsys, dsn, "threads", "diff", thread)
    assert diff["changed"] == {"deal": {"from": {**deal, "amount": 1}, "to": deal}}
    for command in ("show", "wait"):
        code, shown, err = cli(capsys, dsn, "runs", command, run.run_id)
        assert (code, err) == (0, ""), command
        assert shown["run"]["output"] == {"deal": deal}, command
    assert module not in sys.modules  # shown from the stored fields, never imported
    with pytest.raises(UnsafeRowError):  # what a saver that acts on values does
        saver.get_tuple(config)


def test_effects_show_and_resolve_name_unknown_keys(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver
) -> None:
    key = f"cli-effect-{uuid.uuid4()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "attempt, thread_id, node, step) VALUES (%s, 'mail', 'h', 'unknown', 2, 't', 'n', 7)",
            (key,),
        )
    code, shown, _ = cli(capsys, dsn, "effects", "show", key)
    assert (code, shown["effect"]["status"], shown["effect"]["attempt"]) == (0, "unknown", 2)
    code, _, err = cli(capsys, dsn, "resolve", key, "--allow-retry", "--attempt", "1")
    assert code == 1
    assert "at attempt 2 now, not at attempt 1" in err
    resolved = ("effects", "resolve", key, "--completed", '{"id": 5}', "--attempt", "2")
    assert cli(capsys, dsn, *resolved)[0] == 0
    code, shown, _ = cli(capsys, dsn, "effects", "show", key)
    assert (shown["effect"]["status"], shown["effect"]["result"]) == ("completed", {"id": 5})
    for argv in (("effects", "show", "nope"), ("resolve", "nope", "--allow-retry")):
        code, _, err = cli(capsys, dsn, *argv)
        assert code == 1
        assert "No effect with key 'nope'" in err


def test_approvals_are_answered_through_the_run_and_its_authorize_hook(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = approving(saver)
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"order_id": "8890"})
    worker.run_until_idle()
    code, listed, _ = cli(capsys, dsn, "approvals", "list", "--thread", run.thread_id)
    assert [a["value"]["request"] for a in listed["approvals"]] == [
        {"order": "8890", "amount": 420}
    ]

    def work_then_answer(*argv: str) -> tuple[int, Any, str]:
        # The CLI queues the answer and waits; a worker in another thread goes on with it.
        import threading

        done = threading.Event()

        def work() -> None:
            while not done.is_set():
                if worker.run_until_idle():
                    return
                runs.wait_for(run.run_id, timeout=0.2)

        helper = threading.Thread(target=work)
        helper.start()
        try:
            return cli(capsys, dsn, *argv)
        finally:
            done.set()
            helper.join()

    # Refused before anything is sent: the graph run here would leave the registry's run
    # interrupted for good; a wait no timer can hold was found only after the answer went.
    dana = ("approvals", "approve", run.thread_id, "--approver", "dana")
    code, _, err = cli(capsys, dsn, *dana, "--graph", "test_cli_operator:approving")
    assert code == 1
    assert f"belongs to run {run.run_id}" in err
    with pytest.raises(SystemExit) as usage:
        cli(capsys, dsn, *dana, "--timeout", "400000000")
    assert usage.value.code == 2
    assert runs.get(run.run_id).status is RunStatus.INTERRUPTED
    code, answer, _ = work_then_answer("approvals", "approve", run.thread_id, "--approver", "eve")
    assert (code, answer["accepted"]) == (1, False)
    assert "eve is not a manager" in answer["refused"]
    code, answer, _ = work_then_answer(
        "approvals", "approve", run.thread_id, "--approver", "dana", "--comment", "ok"
    )
    assert (code, answer["accepted"], answer["run"]["status"]) == (0, True, "success")
    assert runs.output_of(runs.get(run.run_id))["log"] == ["refunded"]
    code, _, err = cli(capsys, dsn, "approvals", "approve", run.thread_id, "--approver", "dana")
    assert code == 1
    assert "not waiting for an approval" in err
    code, _, err = cli(capsys, dsn, "approvals", "approve", run.thread_id, "--approver", "")
    assert code == 1
    assert "approver" in err


def test_ctrl_c_after_an_answer_was_queued_says_where_it_went(
    dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = approving(saver)
    run = runs.create(graph, {"order_id": "8891"})
    Worker(saver, [graph]).run_until_idle()
    argv = ["approvals", "approve", run.thread_id, "--approver", "dana", "--dsn", dsn]
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WAIT, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 130
    assert done.stderr == (
        f"error: interrupted: the answer was queued to run {run.run_id}, which goes on "
        f"without this command; `langgraph-durable runs wait {run.run_id}` follows it\n"
    )
    assert runs.get(run.run_id).status is RunStatus.PENDING


def test_approve_on_a_plain_interrupt_says_what_the_thread_waits_for(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver
) -> None:
    def ask(state: State) -> State:
        return {"order_id": interrupt("which order?")}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": f"cli-plain-{uuid.uuid4().hex[:8]}"}}
    graph.invoke({"log": []}, config)
    thread = config["configurable"]["thread_id"]
    code, listed, _ = cli(capsys, dsn, "approvals", "list", "--thread", thread)
    assert code == 0
    (question,) = listed["approvals"]
    code, _, err = cli(capsys, dsn, "approvals", "approve", thread, "--approver", "dana")
    assert code == 1
    assert "waits at an interrupt() that asks something other than an approval " in err
    assert question["interrupt_id"] in err
    assert "runs resume RUN_ID --value JSON" in err
    assert graph.get_state(config).next == ("ask",)  # nothing was sent


def test_approvals_can_run_the_graph_in_the_cli_process(
    capsys: pytest.CaptureFixture[str],
    dsn: str,
    saver: DurablePostgresSaver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = tmp_path / "cli_approval_graph.py"
    module.write_text(
        textwrap.dedent(
            """
            import test_cli_operator as t

            def graph(saver):  # the CLI's saver
                return t.approving(saver)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    thread = f"cli-graph-{uuid.uuid4().hex[:6]}"
    config: Any = {"configurable": {"thread_id": thread}}
    approving(saver).graph.invoke({"order_id": "9"}, config)
    code, _, err = cli(
        capsys, dsn, "approvals", "approve", thread, "--approver", "dana", "--graph", "nope:graph"
    )
    assert code == 1
    assert "could not be loaded" in err
    code, answer, _ = cli(
        capsys,
        dsn,
        "approvals",
        "reject",
        thread,
        "--approver",
        "dana",
        "--graph",
        "cli_approval_graph:graph",
    )
    assert (code, answer["accepted"], answer["via"]) == (0, True, "graph")
    assert approving(saver).graph.get_state(config).values["approval_outcome"] == "rejected"
    sys.modules.pop("cli_approval_graph", None)


def test_a_graph_that_fails_after_the_answer_exits_3_with_its_error(
    capsys: pytest.CaptureFixture[str],
    dsn: str,
    saver: DurablePostgresSaver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    thread = f"cli-fail-{uuid.uuid4().hex[:6]}"
    failing_refund(saver).invoke({"order_id": "7"}, {"configurable": {"thread_id": thread}})
    answer = ("approvals", "approve", thread, "--approver", "dana")
    graph = ("--graph", "test_cli_operator:failing_refund")
    code, result, _ = cli(capsys, dsn, *answer, *graph)
    assert code == 3
    assert (result["accepted"], result["via"]) == (True, "graph")
    assert result["error"] == "RuntimeError: warehouse system down"
    thread = f"cli-fail-{uuid.uuid4().hex[:6]}"
    failing_refund(saver).invoke({"order_id": "8"}, {"configurable": {"thread_id": thread}})
    code, out = text(capsys, dsn, "approvals", "approve", thread, "--approver", "dana", *graph)
    assert code == 3
    assert "approved by dana" in out
    assert "the graph failed: RuntimeError: warehouse system down" in out


def test_doctor_reports_settings_and_a_missing_schema(
    capsys: pytest.CaptureFixture[str], dsn: str, fresh_db_dsn: str
) -> None:
    code, report, _ = cli(capsys, dsn, "doctor")
    checks = {f["check"]: f for f in report["findings"]}
    assert {"fsync", "synchronous_commit", "wal_level", "connections", "schema"} <= set(checks)
    assert checks["schema"]["level"] == "ok"
    assert checks["privileges"]["level"] == "ok"
    levels = [f["level"] for f in report["findings"]]
    assert (report["failures"], report["warnings"]) == (levels.count("fail"), levels.count("warn"))
    assert code == (1 if report["failures"] else 5 if report["warnings"] else 0)
    assert report["ok"] is (code == 0)
    code, report, _ = cli(capsys, fresh_db_dsn, "doctor")
    assert (code, report["ok"]) == (1, False)
    assert [f["level"] for f in report["findings"] if f["check"] == "schema"] == ["fail"]
    code, _, err = cli(capsys, fresh_db_dsn, "runs", "list")
    assert code == 1
    assert "setup" in err
    assert "Traceback" not in err


def test_doctor_reports_value_columns_left_on_pglz(
    capsys: pytest.CaptureFixture[str], fresh_db_dsn: str
) -> None:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    if not server_has_lz4(fresh_db_dsn):
        pytest.skip("this server has no lz4")
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        _, report, _ = cli(capsys, fresh_db_dsn, "doctor")
        checks = {f["check"]: f for f in report["findings"]}
        assert (checks["value compression"]["level"], checks["value compression"]["seen"]) == (
            "ok",
            "lz4",
        )
        # As after a restore with `pg_dump --no-toast-compression`.
        conn.execute("ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION pglz")
    code, report, _ = cli(capsys, fresh_db_dsn, "doctor")
    found = {f["check"]: f for f in report["findings"]}["value compression"]
    assert (found["level"], found["seen"]) == ("warn", "not lz4: checkpoint_blobs.blob")
    assert "ALTER TABLE checkpoint_blobs ALTER COLUMN blob SET COMPRESSION lz4" in found["advice"]
    # A warning is not "fine" without saying so, nor "ok", and has its own exit code.
    assert report["failures"] == 0, report
    assert (code, report["ok"], report["warnings"]) == (5, False, 1)
    code, out = text(capsys, fresh_db_dsn, "doctor")
    assert code == 5
    assert out.rstrip().endswith("doctor: fine, 1 warning")


def test_doctor_fails_a_database_that_commits_asynchronously(
    capsys: pytest.CaptureFixture[str], fresh_db_dsn: str
) -> None:
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    name = conninfo_to_dict(fresh_db_dsn)["dbname"]
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(
                sql.Identifier(str(name))
            )
        )
    code, report, _ = cli(capsys, fresh_db_dsn, "doctor")
    found = {f["check"]: f for f in report["findings"]}["synchronous_commit"]
    assert (found["level"], found["seen"]) == ("fail", "synchronous_commit = off")
    assert (code, report["ok"]) == (1, False)
    code, out = text(capsys, fresh_db_dsn, "doctor")
    assert code == 1
    assert "doctor: problems found (1 failed" in out


def test_db_start_url_and_stop_an_embedded_server(
    capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    import shutil
    import tempfile

    # Not pytest's tmp_path: as root, pgserver opens up the parents of its data dir.
    parent = Path(tempfile.mkdtemp(prefix="langgraph-durable-cli-db-"))
    data_dir = parent / "pgdata"
    try:
        capsys.readouterr()
        assert main(["db", "start", "--data-dir", str(data_dir), "--json"]) == 0
        started = json.loads(capsys.readouterr().out)["dsn"]
        with psycopg.connect(started) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert main(["db", "url", "--data-dir", str(data_dir), "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"dsn": started}
        assert main(["setup", "--dsn", started]) == 0
    finally:
        assert main(["db", "stop", "--data-dir", str(data_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"stopped": True}
    assert main(["db", "url", "--data-dir", str(data_dir)]) == 1
    assert "db start" in capsys.readouterr().err
    assert main(["db", "stop", "--data-dir", str(data_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"stopped": False}
    shutil.rmtree(parent, ignore_errors=True)


class _Terminal:
    def __init__(self) -> None:
        self.written: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_progress_is_drawn_only_on_a_terminal() -> None:
    terminal = _Terminal()
    progress = Progress(4, "pruning", stream=terminal)  # type: ignore[arg-type]
    for _ in range(4):
        progress.advance()
    drawn = "".join(terminal.written)
    assert "pruning [" in drawn
    assert drawn.rstrip().endswith("4/4")

    class _Pipe(_Terminal):
        def isatty(self) -> bool:
            return False

    pipe = _Pipe()
    Progress(4, "pruning", stream=pipe).advance(4)  # type: ignore[arg-type]
    assert pipe.written == []


@pytest.fixture(autouse=True)
def _no_stray_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGGRAPH_DURABLE_PGDATA", raising=False)


def test_approvals_answer_the_question_named_by_its_interrupt_id(
    capsys: pytest.CaptureFixture[str],
    dsn: str,
    saver: DurablePostgresSaver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    thread = f"cli-pair-{uuid.uuid4().hex[:6]}"
    config: Any = {"configurable": {"thread_id": thread}}
    two_at_once(saver).invoke({}, config)
    code, listed, _ = cli(capsys, dsn, "approvals", "list", "--thread", thread)
    first, second = (a["interrupt_id"] for a in listed["approvals"])
    code, out = text(capsys, dsn, "approvals", "list", "--thread", thread)
    assert code == 0
    assert first in out
    assert second in out

    def approve(interrupt_id: str, approver: str = "dana") -> tuple[int, Any, str]:
        return cli(
            capsys,
            dsn,
            *("approvals", "approve", thread, "--approver", approver),
            *("--interrupt", interrupt_id, "--graph", "test_cli_operator:two_at_once"),
        )

    code, _, err = approve("nope")
    assert code == 1
    assert f"no approval waiting under interrupt id 'nope' (waiting: {first!r}, {second!r})" in err
    # Refused by the node: the question is asked again, and the command says so.
    code, answer, _ = approve(first, "eve")
    assert (code, answer["accepted"]) == (1, False)
    assert "eve may not answer" in answer["refused"]
    # The other question goes through, though the first still carries its refusal.
    code, answer, _ = approve(second)
    assert (code, answer["via"], answer["accepted"], answer["refused"]) == (0, "graph", True, None)
    code, listed, _ = cli(capsys, dsn, "approvals", "list", "--thread", thread)
    (still,) = listed["approvals"]  # the first, asked again with its refusal, under a new id
    assert still["interrupt_id"] not in (first, second)
    assert "eve may not answer" in still["value"]["refused"]


def test_a_subgraphs_answers_get_their_own_verdicts(
    capsys: pytest.CaptureFixture[str],
    dsn: str,
    saver: DurablePostgresSaver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A subgraph's two questions share the parent's task: a refusal of one is not the
    other's verdict, either way round."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    thread = f"cli-sub-{uuid.uuid4().hex[:6]}"
    two_in_a_subgraph(saver).invoke({}, {"configurable": {"thread_id": thread}})
    code, listed, _ = cli(capsys, dsn, "approvals", "list", "--thread", thread)
    left, right = listed["approvals"]
    assert left["task_id"] == right["task_id"]

    def approve(interrupt_id: str, approver: str) -> tuple[int, Any, str]:
        return cli(
            capsys,
            dsn,
            *("approvals", "approve", thread, "--approver", approver),
            *("--interrupt", interrupt_id, "--graph", "test_cli_operator:two_in_a_subgraph"),
        )

    code, answer, _ = approve(left["interrupt_id"], "eve")
    assert (code, answer["accepted"]) == (1, False)
    assert "eve may not answer" in answer["refused"]
    code, answer, _ = approve(right["interrupt_id"], "dana")  # the left one stays refused
    assert (code, answer["accepted"], answer["refused"]) == (0, True, None)
    code, listed, _ = cli(capsys, dsn, "approvals", "list", "--thread", thread)
    (left_again,) = listed["approvals"]
    code, answer, _ = approve(left_again["interrupt_id"], "eve")
    assert (code, answer["accepted"]) == (1, False)


def test_an_older_interrupted_run_is_not_answered_while_a_newer_run_waits(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    graph = approving(saver)
    worker = Worker(saver, [graph])
    first = runs.create(graph, {"order_id": "8892"})
    worker.run_until_idle()  # waits at the approval
    newer = runs.create(graph, {"order_id": "8893"}, thread_id=first.thread_id)
    code, out = text(
        capsys, dsn, "approvals", "approve", first.thread_id, "--approver", "dana", "--timeout", "0"
    )
    assert code == 1
    assert f"its run {newer.run_id} is pending" in out
    assert runs.get(first.run_id).status.value == "interrupted"
    assert runs.get(newer.run_id).status.value == "pending"


def test_an_answer_no_worker_took_by_the_timeout_is_reported_queued(
    capsys: pytest.CaptureFixture[str], dsn: str, saver: DurablePostgresSaver, runs: RunRegistry
) -> None:
    """Until a worker judges the answer, what waits (here, the question with an earlier
    refusal) is no verdict on it: exit 4, as `runs wait` when the run has not finished."""
    graph = approving(saver)
    worker = Worker(saver, [graph])
    run = runs.create(graph, {"order_id": "8891"})
    worker.run_until_idle()
    runs.resume(run.run_id, Command(resume={"approved": True, "approver": "eve"}))
    worker.run_until_idle()  # refused: asked again with eve's refusal
    code, answer, _ = cli(
        capsys, dsn, "approvals", "approve", run.thread_id, "--approver", "dana", "--timeout", "0"
    )
    assert (code, answer["accepted"], answer["refused"]) == (4, None, None)
    assert answer["run"]["status"] == "pending"
    code, out = text(capsys, dsn, "approvals", "approve", run.thread_id, "--approver", "dana")
    assert code == 1
    assert (
        f"on its way (an answer sent before, or a newer run): its run {run.run_id} is pending"
        in out
    )
    code, out = text(capsys, dsn, "runs", "wait", run.run_id, "--timeout", "0")
    assert (code, "pending" in out) == (4, True)
    worker.run_until_idle()
    assert runs.get(run.run_id).status.value == "success"
    assert runs.output_of(runs.get(run.run_id))["log"] == ["refunded"]
