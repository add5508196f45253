"""`langgraph-durable web`: the console served by one command, and its clear failures."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from console_host import tagged_builder
from console_world import csrf_of, form_fields, start_plain
from starlette.testclient import TestClient

import langgraph_durable.cli as cli_module
from langgraph_durable import DurablePostgresSaver
from langgraph_durable.approvals import pending_approvals
from langgraph_durable.cli import main
from langgraph_durable.web._serve import standalone_app

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def cli(
    *args: str, dsn: str, path: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`langgraph-durable ARGS` in a child process (with `env` added to its environment);
    `path` is importable there too."""
    paths = [str(HERE)] if path is None else [str(HERE), str(path)]
    env = {
        **os.environ,
        "LANGGRAPH_DURABLE_DSN": dsn,
        "PYTHONPATH": os.pathsep.join(paths),
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "langgraph_durable.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def serving(server: subprocess.Popen[str]) -> list[str]:
    """What a `web` child printed until uvicorn listens; fails the test if it exits first."""
    assert server.stdout is not None
    seen = []
    for line in server.stdout:  # blocks until uvicorn says it listens (or exits)
        seen.append(line)
        if "Uvicorn running on" in line:
            break
    assert any("Uvicorn running on" in line for line in seen), "".join(seen)
    return seen


def test_web_serves_the_console_and_answers_as_the_header_user(
    world: str, example: ModuleType
) -> None:
    thread = start_plain(world, example)
    port = free_port()
    server = cli(
        "web",
        "--port",
        str(port),
        "--user-header",
        "X-User",
        "--graph",
        "console_host:northwind_version",
        dsn=world,
    )
    try:
        seen = serving(server)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, headers={"X-User": "manager-ana"}) as client:
            inbox = client.get("/")
            assert inbox.status_code == 200
            assert thread in inbox.text
            assert "you (manager-ana) may answer" in inbox.text
            page = client.get("/approval", params={"thread_id": thread}).text
            fields = form_fields(page)
            assert fields["csrf_token"] == csrf_of(page)
            done = client.post("/approval/answer", data={**fields, "action": "approve"})
            assert done.status_code == 303
            assert "Nothing is waiting" in client.get("/").text
        with httpx.Client(base_url=base) as nobody:
            assert nobody.get("/runs").status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        server.wait()
    assert world not in "".join(seen)


HIJACKER = """
from pathlib import Path
Path(__file__).with_suffix(".ran").write_text("imported from the current directory")
raise ImportError("not the real module")
"""

GRAPH_MODULE = """
from typing_extensions import TypedDict
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    n: int


builder = StateGraph(State)
builder.add_node("step", lambda state: state)
builder.add_edge(START, "step")
builder.add_edge("step", END)

"""


def test_web_graph_runs_no_module_of_the_current_directory_but_the_graph_s(
    world: str, tmp_path: Path
) -> None:
    """`--graph` puts the current directory on sys.path (last); uvicorn's automatic
    choice then imported `uvloop` and `httptools` by name, and as neither is installed
    with the console, files of those names in the directory ran."""
    script = Path(sys.executable).with_name("langgraph-durable")
    if not script.exists():
        pytest.fail(f"the installed script is missing: {script}")
    (tmp_path / "console_graphs.py").write_text(GRAPH_MODULE)
    for name in ("uvloop", "httptools"):
        (tmp_path / f"{name}.py").write_text(HIJACKER)
    port = free_port()
    env = {**os.environ, "LANGGRAPH_DURABLE_DSN": world}
    env.pop("PYTHONPATH", None)
    server = subprocess.Popen(
        [str(script), "web", "--port", str(port), "--graph", "console_graphs:builder"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        serving(server)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.get("/").status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        server.wait()
    assert sorted(p.name for p in tmp_path.glob("*.ran")) == []


def test_web_with_a_wrong_dsn_or_no_schema_fails_in_one_clear_line(
    fresh_db_dsn: str,
) -> None:
    no_schema = cli("web", "--port", str(free_port()), dsn=fresh_db_dsn)
    out, _ = no_schema.communicate()
    assert no_schema.returncode == 1, out
    assert out.startswith("error: ")
    assert "setup" in out
    wrong = "postgresql://someone:s3cret-pw@127.0.0.1:1/nowhere"
    unreachable = cli("web", "--port", str(free_port()), "--dsn", wrong, dsn=wrong)
    out, _ = unreachable.communicate()
    assert unreachable.returncode == 1, out
    assert out.startswith("error: ")
    assert "s3cret-pw" not in out


def test_web_with_a_graph_that_cannot_be_imported_fails_in_one_clear_line(world: str) -> None:
    """Before the server starts: inside its start-up uvicorn would print a traceback."""
    for spec in ("console_host:no_such_graph", "no_such_module:graph", "no-colon"):
        server = cli("web", "--port", str(free_port()), "--graph", spec, dsn=world)
        out, _ = server.communicate(timeout=120)  # a server that starts fails the test
        assert server.returncode == 1, out
        assert out.startswith(f"error: --graph {spec!r}"), out
        assert "Traceback" not in out


WRONG_KINDS = """
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    n: int


builder = StateGraph(State)
builder.add_node("step", lambda state: state)
builder.add_edge(START, "step")
builder.add_edge("step", END)
compiled = builder.compile()
number = 7


def no_saver():
    return builder.compile()


def returns_none(saver):
    return None


def raises(saver):
    raise RuntimeError("cannot build: postgresql://app:zzpw@db/prod")
"""


def test_web_with_a_graph_of_the_wrong_kind_fails_in_one_clear_line(
    world: str, tmp_path: Path
) -> None:
    """Checked before the server starts, as an import is: a compiled graph (it has no saver
    of the console's), a function that cannot take the saver, something else; and a function
    that raises or returns something else once called with a saver (a password in its
    error hidden). Those printed uvicorn's traceback, then advised another --port."""
    (tmp_path / "wrong_kinds.py").write_text(WRONG_KINDS)
    cases = {
        "compiled": "is a compiled graph",
        "no_saver": "cannot take the saver as its one argument",
        "number": "is of type int, neither a StateGraph nor a function",
        "returns_none": "returned a NoneType; the function must return a compiled graph",
        "raises": "raised RuntimeError when called with the console's saver: cannot build: "
        "postgresql://***@db/prod",
    }
    for name, why in cases.items():
        spec = f"wrong_kinds:{name}"
        server = cli("web", "--port", str(free_port()), "--graph", spec, dsn=world, path=tmp_path)
        out, _ = server.communicate(timeout=120)  # a server that starts fails the test
        assert server.returncode == 1, out
        assert out.startswith(f"error: --graph {spec!r} "), out
        assert why in out
        assert "Traceback" not in out
        assert len(out.strip().splitlines()) == 1, out


def test_a_request_with_the_sign_in_header_twice_is_refused(world: str) -> None:
    """A proxy that appends the header instead of replacing it lets the client's copy
    through as well: the console once took the first copy, which may be the client's."""
    with TestClient(standalone_app(world, user_header="X-User")) as client:
        assert client.get("/", headers={"X-User": "manager-ana"}).status_code == 200
        for path in ("/", "/effects", "/approval?thread_id=t"):
            twice = client.get(path, headers=[("X-User", "manager-ana"), ("x-user", "mallory")])
            assert twice.status_code == 403, path
            assert "the sign-in header (X-User) appears more than once" in twice.text
        posted = client.post(
            "/effects/resolve", headers=[("X-User", "a"), ("X-User", "b")], data={"key": "k"}
        )
        assert posted.status_code == 403


def test_the_web_help_and_the_cli_docstring_name_the_secret_and_the_header(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["web", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "LANGGRAPH_DURABLE_WEB_SECRET" in help_text
    assert "--user-header HEADER" in help_text
    assert "do not use it in a directory you do not trust" in help_text  # --graph runs code
    assert cli_module.__doc__ is not None
    assert "--user-header" in cli_module.__doc__
    assert "LANGGRAPH_DURABLE_WEB_SECRET" in cli_module.__doc__


def test_a_page_from_one_console_process_is_answered_by_another(world: str) -> None:
    """Behind a load balancer with one secret, as the README says: the page comes from
    one process, the answer goes to another. The question's token once hashed the payload
    as text, and a set's text follows each process's string hash seed: refused (409)."""
    thread = "tagged-1"
    with DurablePostgresSaver.from_conn_string(world) as saver:
        tagged_builder().compile(checkpointer=saver).invoke(
            {"tags": ["urgent", "vip", "refund", "eu"]}, {"configurable": {"thread_id": thread}}
        )
    ports = [free_port(), free_port()]
    servers = [
        cli(
            *("web", "--port", str(port), "--user-header", "X-User"),
            *("--graph", "console_host:tagged"),
            dsn=world,
            env={"PYTHONHASHSEED": seed, "LANGGRAPH_DURABLE_WEB_SECRET": "one-secret"},
        )
        for port, seed in zip(ports, ("1", "2"), strict=True)
    ]
    try:
        for server in servers:
            serving(server)
        with httpx.Client(headers={"X-User": "manager-ana"}) as client:
            page = client.get(f"http://127.0.0.1:{ports[0]}/approval", params={"thread_id": thread})
            fields = {**form_fields(page.text), "action": "approve"}
            done = client.post(f"http://127.0.0.1:{ports[1]}/approval/answer", data=fields)
        assert done.status_code == 303, done.text
        assert done.headers["location"] == "/?notice=answered"
    finally:
        for server in servers:
            server.send_signal(signal.SIGINT)
            server.wait()
    with DurablePostgresSaver.from_conn_string(world) as saver:
        assert pending_approvals(saver, thread_id=thread) == []
