"""`check_graph`: find nodes that both call `interrupt()` and perform side effects.

A static look at each node's source (and at the tools of a `ToolNode`): calls to
`interrupt`, calls to `@effect` functions, and calls into well-known network, HTTP and
email clients. Each node that has both gets a finding with file and line numbers and the
fix. It reads source code; it cannot see effects hidden behind indirection, so treat an
empty result as "nothing obvious", not as proof.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from langgraph_durable.errors import ConfigurationError

__all__ = ["GuardFinding", "check_graph"]

NETWORK_MODULES = frozenset(
    {
        "aiohttp", "boto3", "botocore", "httpx", "requests", "sendgrid", "slack_sdk",
        "smtplib", "stripe", "twilio", "urllib", "urllib3", "socket", "openai", "anthropic",
    }
)  # fmt: skip


@dataclass(frozen=True)
class GuardFinding:
    """A node that performs effects and interrupts in the same execution."""

    node: str
    file: str
    interrupt_lines: tuple[int, ...]
    effects: tuple[tuple[str, int], ...]

    @property
    def message(self) -> str:
        where = ", ".join(f"{name} (line {line})" for name, line in self.effects)
        lines = ", ".join(str(n) for n in self.interrupt_lines)
        return (
            f"{self.file}: node {self.node!r} calls interrupt() (line {lines}) and performs "
            f"{where}. LangGraph re-runs the whole node on resume: move "
            f"{', '.join(name for name, _ in self.effects)} into its own node before the "
            "approval node."
        )


def _functions_of(runnable: Any) -> Iterator[Callable[..., Any]]:
    """The Python functions a node runs: its callable, or each tool of a ToolNode."""
    tools = getattr(runnable, "tools_by_name", None)
    if isinstance(tools, dict):
        for tool in tools.values():
            for attr in ("func", "coroutine"):
                fn = getattr(tool, attr, None)
                if fn is not None:
                    yield fn
        return
    for attr in ("func", "afunc"):
        fn = getattr(runnable, attr, None)
        if fn is not None:
            yield fn


def _resolve(fn: Callable[..., Any], node: ast.expr) -> Any:
    """The object an expression like `name` or `module.attr` names in fn's scope."""
    scope: dict[str, Any] = dict(getattr(fn, "__globals__", {}))
    with contextlib.suppress(TypeError, ValueError):
        scope.update(inspect.getclosurevars(fn).nonlocals)
    path: list[str] = []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in scope:
        return None
    found = scope[node.id]
    for attr in reversed(path):
        found = getattr(found, attr, None)
        if found is None:
            return None
    return found


def _is_network(obj: Any) -> bool:
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "")
    return isinstance(module, str) and module.split(".")[0] in NETWORK_MODULES


def _scan(fn: Callable[..., Any]) -> tuple[str, list[int], list[tuple[str, int]]] | None:
    target = inspect.unwrap(fn)
    try:
        lines, first = inspect.getsourcelines(target)
        filename = inspect.getsourcefile(target) or "<unknown>"
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    interrupts: list[int] = []
    effects: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        line = first + node.lineno - 1
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
        obj = _resolve(target, callee)
        if name == "interrupt" and (
            obj is None or getattr(obj, "__module__", "") == "langgraph.types"
        ):
            interrupts.append(line)
        elif obj is not None and hasattr(obj, "__effect__"):
            effects.append((name, line))
        elif (obj is not None and _is_network(obj)) or (
            isinstance(callee, ast.Attribute) and _is_network(_resolve(target, callee.value))
        ):
            effects.append((ast.unparse(callee), line))
    return filename, interrupts, effects


def check_graph(graph: Any) -> list[GuardFinding]:
    """List the nodes of a compiled graph that call `interrupt()` and perform effects.

    Args:
        graph: A compiled `StateGraph` (or anything with `.builder.nodes`).
    """
    builder = getattr(graph, "builder", None)
    nodes = getattr(builder, "nodes", None)
    if not isinstance(nodes, dict):
        raise ConfigurationError(
            "check_graph needs a graph compiled from a StateGraph (it reads graph.builder.nodes)."
        )
    findings: list[GuardFinding] = []
    for name, spec in nodes.items():
        runnable = getattr(spec, "runnable", spec)
        interrupts: list[int] = []
        effects: list[tuple[str, int]] = []
        filename = "<unknown>"
        seen: set[int] = set()
        for fn in _functions_of(runnable):
            if id(inspect.unwrap(fn)) in seen:
                continue
            seen.add(id(inspect.unwrap(fn)))
            scanned = _scan(fn)
            if scanned is None:
                continue
            filename = scanned[0]
            interrupts += scanned[1]
            effects += scanned[2]
        if interrupts and effects:
            findings.append(
                GuardFinding(
                    node=name,
                    file=filename,
                    interrupt_lines=tuple(sorted(interrupts)),
                    effects=tuple(sorted(effects, key=lambda e: e[1])),
                )
            )
    return findings
