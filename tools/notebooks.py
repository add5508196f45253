"""The notebooks as a reader sees them: `.ipynb` files with outputs, made from the `.py`.

The reviewable source of each notebook is its jupytext percent-format `notebooks/*.py`;
the committed `notebooks/*.ipynb` is made from it and executed, so that GitHub and Jupyter
show the tables and plots of a real run.

    python tools/notebooks.py --execute   # run every notebook, write the .ipynb files
    python tools/notebooks.py --check     # fail when an .ipynb no longer matches its .py

`--execute` runs each notebook in a kernel of this interpreter against
`LANGGRAPH_DURABLE_DSN` (else an embedded Postgres) and prints progress per notebook.
`--check` needs no database: it fails when a `.py` has no `.ipynb`, an `.ipynb` has no
`.py`, the cells' sources differ, or a code cell that should have run has no outputs. It
compares sources only: outputs of a run may age (ids, timings), the code may not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT_S = 300


def sources() -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob("*.py") if not p.name.startswith("_"))


def _source(cell: Any) -> str:
    """A cell's source as one string (files store it as a list of lines)."""
    source = cell["source"]
    return ("".join(source) if isinstance(source, list) else str(source)).strip()


def _cells(notebook: Any) -> list[tuple[str, str]]:
    return [(cell["cell_type"], _source(cell)) for cell in notebook["cells"]]


def check() -> list[str]:
    import jupytext

    problems = []
    made = {p.with_suffix(".ipynb") for p in sources()}
    for stray in sorted(set(NOTEBOOKS.glob("*.ipynb")) - made):
        problems.append(f"{stray.name}: no {stray.stem}.py beside it")
    for source in sources():
        target = source.with_suffix(".ipynb")
        if not target.exists():
            problems.append(f"{source.name}: no {target.name}; run tools/notebooks.py --execute")
            continue
        written = json.loads(target.read_text(encoding="utf-8"))
        if _cells(jupytext.read(source)) != _cells(written):
            problems.append(f"{target.name} is stale: its cells differ from {source.name}")
        unrun = [
            i
            for i, cell in enumerate(written["cells"])
            if cell["cell_type"] == "code"
            and str(cell["source"]).strip()
            and cell.get("execution_count") is None
        ]
        if unrun:
            problems.append(f"{target.name}: code cells {unrun} were never run")
    return problems


def _kernel_manager(folder: Path) -> Any:
    """A kernel of this very interpreter, found in a folder searched alone."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = folder / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (ipykernel)", "language": "python"})
    )
    specs = KernelSpecManager(kernel_dirs=[str(folder)], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def execute(names: list[str]) -> int:
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    chosen = [p for p in sources() if not names or p.stem in names]
    with tempfile.TemporaryDirectory() as kernels:
        for source in chosen:
            started = time.monotonic()
            print(f"running {source.name} ...", flush=True)
            notebook = jupytext.read(source)
            client = NotebookClient(
                notebook,
                km=_kernel_manager(Path(kernels)),
                timeout=CELL_TIMEOUT_S,
                resources={"metadata": {"path": str(NOTEBOOKS)}},
            )
            client.execute()
            for cell in notebook.cells:
                cell.get("metadata", {}).pop("execution", None)  # timings change every run
            target = source.with_suffix(".ipynb")
            nbformat.write(notebook, target)
            print(f"wrote {target.relative_to(ROOT)} ({time.monotonic() - started:.0f} s)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--execute", action="store_true", help="run and write the .ipynb files")
    mode.add_argument("--check", action="store_true", help="fail on a stale .ipynb (CI)")
    parser.add_argument("names", nargs="*", help="only these notebooks (by name)")
    args = parser.parse_args()
    if args.execute:
        return execute(args.names)
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
