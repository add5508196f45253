"""Generate the sync modules from their async sources, and check that they are I/O only.

The async code is the source of truth (as in psycopg's `tools/async_to_sync.py` and
httpcore's `unasync.py`): this script rewrites `await`/`async` constructs and async names
into their sync twins, token by token, then formats the result with ruff.

    python tools/async_to_sync.py           # rewrite the generated files
    python tools/async_to_sync.py --check   # exit 1 on any problem below (CI)

Renames are derived from what the sources define: an `async def aname` (or `_aname`)
becomes `name` (`_name`), a class `AsyncName` becomes `Name`, a source module `_aname.py`
becomes `_name.py`. Only names defined elsewhere (psycopg, the standard library,
LangGraph) are listed by hand in `EXTERNAL`.

`--check` fails when a generated file is stale; when a file claims to be generated but is
not listed in `FILES`; when a rule in `EXTERNAL` or `NOT_PREFIXED` is never used; when a
generated file still holds async syntax or an async name; when a source docstring lacks
the marker line the generator rewrites; and when a source holds code that is not I/O (a
plain function, a class without async methods, a constant): such code must live once, in
a module that is not generated, so that both flavours share it.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "langgraph_durable"

# source -> generated, relative to the package
FILES = {
    "_db/_asource.py": "_db/_source.py",
    "_db/_amigrate.py": "_db/_migrate.py",
    "checkpoint/_asaver.py": "checkpoint/_saver.py",
    "effects/_ajournal.py": "effects/_journal.py",
    "effects/_arunner.py": "effects/_runner.py",
    "approvals/_apending.py": "approvals/_pending.py",
    "runs/_aregistry.py": "runs/_registry.py",
    "runs/_aworker.py": "runs/_worker.py",
    "ops/_athreads.py": "ops/_threads.py",
    "ops/_adoctor.py": "ops/_doctor.py",
    "outbox/_aoutbox.py": "outbox/_outbox.py",
}

# Names defined outside our sources, and the hand-written pair of `checkpoint/_bridge.py`.
EXTERNAL = {
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncConnection": "Connection",
    "AsyncCursor": "Cursor",
    "AsyncPipeline": "Pipeline",
    "AsyncIterator": "Iterator",
    "asynccontextmanager": "contextmanager",
    "AsyncPostgresSaver": "PostgresSaver",
    "AsyncHeartbeat": "Heartbeat",
    "AsyncTermination": "Termination",
    "afinish_despite_cancel": "finish_despite_interrupt",
    "amigration_hook_result": "migration_hook_result",
    "aeffects_may_start": "effects_may_start",
    "check_async_worker_graphs": "check_sync_worker_graphs",
    "AsyncWriteParking": "WriteParking",
    "AsyncPutCombiner": "PutCombiner",
    "AsyncPoolGate": "PoolGate",
    "SyncCallsViaLoop": "RefusesAsyncCalls",
    "ainvoke": "invoke",
    "aget_state": "get_state",
}

# `async def` names that start with "a" without it being the async prefix.
NOT_PREFIXED: set[str] = set()

MARKER = "Async source: the sync twin is generated from this file."
GENERATED_MARKER = "Generated from the async source; edit that file, not this one."

PATTERNS = [
    (re.compile(r"^.*# async-only\b.*\n", re.MULTILINE), ""),
    (re.compile(r"\basync def\b"), "def"),
    (re.compile(r"\basync with\b"), "with"),
    (re.compile(r"\basync for\b"), "for"),
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\bCoroutine\[Any, Any, T\]"), "T"),
    (re.compile(r"\bAwaitable\[([^\[\]]+)\]"), r"\1"),
    (re.compile(r"\basyncio\.Condition\b"), "threading.Condition"),
    (re.compile(r"\basyncio\.Lock\b"), "threading.Lock"),
    (re.compile(r"\basyncio\.sleep\b"), "time.sleep"),
    (re.compile(r"^import asyncio$", re.MULTILINE), "import threading\nimport time"),
]

LEFTOVERS = re.compile(r"^(async|await|asyncio|Coroutine|Async[A-Z]\w*)$")
_PREFIXED = re.compile(r"^(_?)a([a-z]\w*)$")


def _module_renames() -> dict[str, str]:
    """Dotted and bare module names of each source, to those of its generated twin."""
    renames: dict[str, str] = {}
    for source, target in FILES.items():
        source_mod = "langgraph_durable." + source.removesuffix(".py").replace("/", ".")
        target_mod = "langgraph_durable." + target.removesuffix(".py").replace("/", ".")
        renames[source_mod] = target_mod
        renames[Path(source).stem] = Path(target).stem
    return renames


def derived_renames(sources: dict[str, str]) -> dict[str, str]:
    """The async names our sources define, each to its sync name."""
    renames: dict[str, str] = {}
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef)) and _holds_async(node):
                found = _PREFIXED.match(node.name)
                if found and node.name not in NOT_PREFIXED:
                    renames[node.name] = found.group(1) + found.group(2)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Async"):
                renames[node.name] = node.name.removeprefix("Async")
        for node in ast.parse(text).body:  # type aliases such as `AsyncConn = ...`
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.startswith("Async"):
                        renames[target.id] = target.id.removeprefix("Async")
    return renames


def _holds_async(node: ast.AST) -> bool:
    """An async function, or a function that builds one (a decorator of async methods)."""
    return any(isinstance(n, (ast.AsyncFunctionDef, ast.Await)) for n in ast.walk(node))


def code_names(text: str) -> set[str]:
    """The names used in code (not in strings or comments)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {token.string for token in tokens if token.type == tokenize.NAME}


def rename_rules(sources: dict[str, str]) -> list[tuple[re.Pattern[str], str]]:
    names = {**derived_renames(sources), **EXTERNAL, **_module_renames()}
    # Longer names first, so that a name containing another is replaced whole.
    ordered = sorted(names.items(), key=lambda item: -len(item[0]))
    return [(re.compile(rf"(?<![\w.]){re.escape(a)}\b"), b) for a, b in ordered if "." in a] + [
        (re.compile(rf"\b{re.escape(a)}\b"), b) for a, b in ordered if "." not in a
    ]


def convert(source: str, source_name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    text = source.replace(MARKER, GENERATED_MARKER)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    header = (
        f"# WARNING: generated from {source_name} by tools/async_to_sync.py. DO NOT EDIT.\n"
        "# Edit the async source and run `python tools/async_to_sync.py`.\n"
    )
    return header + text


def _is_io(node: ast.stmt) -> bool:
    """Whether a top-level statement of a source belongs in both flavours' I/O shells."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.AsyncFunctionDef)):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # the docstring
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return _holds_async(node)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        value = ast.unparse(node.value) if node.value is not None else ""
        if names <= {"__all__", "logger"}:
            return True
        if re.match(r"(TypeVar|ParamSpec)\(", value):
            return True
        return bool(re.search(r"\bAsync[A-Z]", value))  # a type alias that differs by flavour
    return False


def problems_of(sources: dict[str, str], generated: dict[str, str]) -> list[str]:
    """Everything `--check` reports, besides stale files."""
    problems: list[str] = []
    for name, text in sources.items():
        if MARKER not in (ast.get_docstring(ast.parse(text)) or ""):
            problems.append(f"{name}: the module docstring lacks the line {MARKER!r}")
        for node in ast.parse(text).body:
            if not _is_io(node):
                what = getattr(node, "name", None) or ast.unparse(node).splitlines()[0][:60]
                problems.append(
                    f"{name}:{node.lineno}: {what} is not I/O; define it once in a module that "
                    "is not generated and import it from both flavours"
                )
    derived = derived_renames(sources)
    for name, text in generated.items():
        used = code_names(text)
        for found in sorted(n for n in used if LEFTOVERS.match(n)):
            problems.append(f"{name}: async leftover {found!r}")
        for async_name in sorted(used & set(derived)):
            problems.append(f"{name}: async name {async_name!r} left behind")
        if "edit this file" in text.lower():
            problems.append(f"{name}: a docstring tells the reader to edit a generated file")
    return problems


def unused_rules(sources: dict[str, str]) -> list[str]:
    """Hand-written rules no source needs any more."""
    everything = "\n".join(sources.values())
    return [
        f"unused rule: {name!r} appears in no source; remove it"
        for name in [*EXTERNAL, *NOT_PREFIXED]
        if not re.search(rf"\b{re.escape(name)}\b", everything)
    ]


def unlisted_generated_files() -> list[str]:
    """Files in the package that say they are generated, but that nothing generates."""
    listed = set(FILES.values())
    return [
        f"{path.relative_to(PACKAGE).as_posix()}: says it is generated but is not in FILES"
        for path in PACKAGE.rglob("*.py")
        if path.read_text().startswith("# WARNING: generated from")
        and path.relative_to(PACKAGE).as_posix() not in listed
    ]


def ruff_format(text: str, filename: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(filename), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    fixed = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--fix-only",
            "--select",
            "I,F401",
            "--stdin-filename",
            str(filename),
            "-",
        ],
        input=result.stdout,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    return fixed.stdout or result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on any problem (CI)")
    args = parser.parse_args()
    sources = {name: (PACKAGE / name).read_text() for name in FILES}
    rules = rename_rules(sources)
    generated: dict[str, str] = {}
    stale = []
    for source_name, target_name in FILES.items():
        target = PACKAGE / target_name
        text = ruff_format(convert(sources[source_name], Path(source_name).name, rules), target)
        generated[target_name] = text
        current = target.read_text() if target.exists() else ""
        if text != current:
            if args.check:
                stale.append(target_name)
            else:
                target.write_text(text)
                print(f"wrote {target.relative_to(ROOT)}")
    problems = [f"stale: {name} (run `python tools/async_to_sync.py`)" for name in stale]
    problems += problems_of(sources, generated)
    problems += unused_rules(sources) + unlisted_generated_files()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
