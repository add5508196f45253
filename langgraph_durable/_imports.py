"""Importing the module a command line names (`--graph module:attribute`) from the
current directory too, as `python -m` and uvicorn's CLI do.

The installed `langgraph-durable` script starts with its own folder on `sys.path`, not
the current directory, so `--graph graphs:refunds` run beside `graphs.py` could not import
it (`No module named 'graphs'`) while `python -m langgraph_durable.cli` could. One helper
for `web --graph` and `approvals approve --graph`, so both find the same modules.

This imports and runs code from the current directory: do not run `--graph` in a
directory you do not trust. The directory goes at the END of `sys.path`, so a file there
named like a standard or installed module (`json.py`) never runs in its place; a graph
module must therefore have a name of its own. A module that is not installed is found
there, though: `web` runs uvicorn on the plain asyncio loop and h11 (`web/_serve.py`),
whose automatic choice imported `uvloop` and `httptools` by name, files of those names
in the directory included.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

__all__ = ["import_from_here"]


def import_from_here(module_name: str) -> ModuleType:
    """`importlib.import_module(module_name)`, with the current directory first put at the
    end of `sys.path` if nothing there names it yet (`""` and `"."` do). It stays there:
    the module may import its neighbours later. At the end, not the front: installed and
    standard modules are found first, so a stray file beside the graph cannot replace one
    the console imports lazily."""
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.append(here)
    return importlib.import_module(module_name)
