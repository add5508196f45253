"""Every notebook runs top to bottom in a real kernel, and each asserts its own claims.

The reviewable source of a notebook is its jupytext percent-format `.py` file; the test
makes an `.ipynb` from it in a temporary folder and runs that (the committed `.ipynb` files,
with the outputs of a run, are made by `tools/notebooks.py --execute` and checked against
their sources by `tests/unit/test_notebook_files.py`). The kernel is this interpreter
(`sys.executable -m ipykernel_launcher`), through a kernelspec written to a temporary
folder that is the only one searched, so a `python3` kernelspec installed elsewhere on the
machine cannot be picked up instead.
Notebooks run from `notebooks/` with `LANGGRAPH_DURABLE_DSN` set to the test database.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernelspec = pytest.importorskip("jupyter_client.kernelspec")
manager = pytest.importorskip("jupyter_client.manager")

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(p for p in NOTEBOOKS_DIR.glob("*.py") if not p.name.startswith("_"))
CELL_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of kernelspecs holding one: `python3`, this very interpreter."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec = kernels / "python3"
    spec.mkdir()
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (tests)", "language": "python"})
    )
    return kernels


def test_every_notebook_is_a_jupytext_percent_file() -> None:
    assert {p.stem for p in NOTEBOOKS} >= {
        "approvals",
        "crash_and_resume",
        "durability_modes",
        "unknown_outcomes",
    }
    for path in NOTEBOOKS:
        header = path.read_text().split("# ---", 2)[1]
        assert "format_name: percent" in header, path.name
        assert "name: python3" in header, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_keeps_its_promises(
    path: Path,
    db_dsn: str,
    kernel_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notebook = jupytext.read(path)
    source = tmp_path / f"{path.stem}.ipynb"
    nbformat.write(notebook, source)  # the .ipynb a reader would open, made at test time
    notebook = nbformat.read(source, as_version=4)
    monkeypatch.setenv("LANGGRAPH_DURABLE_DSN", db_dsn)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    specs = kernelspec.KernelSpecManager(kernel_dirs=[str(kernel_dir)], ensure_native_kernel=False)
    km = manager.KernelManager(kernel_name="python3", kernel_spec_manager=specs)
    assert km.kernel_spec is not None
    assert km.kernel_spec.argv[0] == sys.executable
    client = nbclient.NotebookClient(
        notebook,
        km=km,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    try:
        client.execute()
    finally:
        nbformat.write(notebook, tmp_path / f"{path.stem}.executed.ipynb")
    outputs = [o for cell in notebook.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    if "plt.show()" in path.read_text():
        assert any("image/png" in o.get("data", {}) for o in outputs), "no plot was drawn"
