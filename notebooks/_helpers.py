"""Shared cells of the notebooks: find the examples, pick a database, show tables, run processes.

Not a notebook itself (its name starts with an underscore). The notebooks run from this
folder, as Jupyter starts them; the examples folder is put on `sys.path` so that a notebook
can `import seven_step_workflow` and reuse the example's functions.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from psycopg.rows import dict_row

from langgraph_durable.embedded import EmbeddedPostgres, demo_database, demo_note

__all__ = [
    "EXAMPLES",
    "ROOT",
    "database",
    "example",
    "kill",
    "load_example",
    "load_file",
    "print_rows",
    "query",
    "show",
    "start",
    "wait_for",
]


def _repo_root() -> Path:
    here = Path.cwd().resolve()
    for folder in [here, *here.parents]:
        if (folder / "examples" / "seven_step_workflow.py").is_file():
            return folder
    raise RuntimeError("Start the notebook from the repository (its notebooks/ folder).")


ROOT = _repo_root()
EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


def database() -> tuple[str, EmbeddedPostgres | None]:
    """LANGGRAPH_DURABLE_DSN if set, else a fresh embedded Postgres (stop it at the end).

    Every table goes to the schema `langgraph_durable_demo`, so a notebook run against your
    database leaves the rest of it alone.
    """
    dsn, embedded = demo_database()
    print(demo_note(embedded))
    return dsn, embedded


def query(dsn: str, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
    """Rows as dicts."""
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(sql, params).fetchall()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def show(
    dsn: str, sql: str, params: Sequence[Any] | dict[str, Any] = (), title: str = ""
) -> list[dict[str, Any]]:
    """Print the rows of a query as a plain table; return them for assertions."""
    return print_rows(query(dsn, sql, params), title)


class Table:
    """Rows shown as a table: markdown in Jupyter (and on GitHub), plain text elsewhere."""

    def __init__(self, rows: list[dict[str, Any]], title: str = "") -> None:
        self.rows, self.title = rows, title

    def _repr_markdown_(self) -> str:
        lines = [f"**{self.title}**", ""] if self.title else []
        if not self.rows:
            return "\n".join([*lines, "*(no rows)*"])
        names = list(self.rows[0])
        lines.append("| " + " | ".join(names) + " |")
        lines.append("|" + "|".join("---" for _ in names) + "|")
        for row in self.rows:
            cells = (_cell(row[n]).replace("|", "\\|").replace("\n", " ") for n in names)
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def __repr__(self) -> str:
        lines = [self.title] if self.title else []
        if not self.rows:
            return "\n".join([*lines, "  (no rows)"])
        names = list(self.rows[0])
        cells = [[_cell(r[n]) for n in names] for r in self.rows]
        widths = [max(len(n), *(len(c[i]) for c in cells)) for i, n in enumerate(names)]
        lines.append("  " + "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)))
        lines.append("  " + "  ".join("-" * w for w in widths))
        for line in cells:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
        return "\n".join(lines)


def print_rows(rows: list[dict[str, Any]], title: str = "") -> list[dict[str, Any]]:
    """Show dicts with the same keys as a table; return them for assertions."""
    table = Table(rows, title)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - outside Jupyter without IPython
        print(repr(table), end="\n\n")
        return rows
    if get_ipython() is None:
        print(repr(table), end="\n\n")
    else:
        display(table)
    return rows


def load_example(name: str) -> ModuleType:
    """Import an example script as a module, e.g. `load_example("northwind_refund")`."""
    return importlib.import_module(name)


def load_file(relative: str) -> ModuleType:
    """Import a script of the repository by path, e.g. `load_file("benchmarks/x.py")`."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses and typing look their module up here
    spec.loader.exec_module(module)
    return module


def example(name: str, *args: str) -> list[str]:
    """The command line of an example script, run by this notebook's Python."""
    return [sys.executable, str(EXAMPLES / name), *args]


def start(cmd: list[str]) -> subprocess.Popen[str]:
    """Start a worker process (its output goes to the notebook's log, not the cell)."""
    return subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(
    dsn: str,
    sql: str,
    params: Sequence[Any] | dict[str, Any],
    proc: subprocess.Popen[str],
    timeout: float = 60,
) -> None:
    """Block until `sql` returns a row: the worker's signal that it reached its point."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query(dsn, sql, params):
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise RuntimeError(f"worker exited ({proc.returncode}) first:\n{out}\n{err}")
        time.sleep(0.02)
    proc.kill()
    raise TimeoutError(f"no signal after {timeout}s: {sql}")


def kill(proc: subprocess.Popen[str]) -> int:
    """SIGKILL a worker: no cleanup, no flush, like an OOM kill. Returns its exit code."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    return proc.returncode
