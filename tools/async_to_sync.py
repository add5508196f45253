"""Generate the sync saver modules from their async sources.

The async code is the source of truth (as in psycopg's `tools/async_to_sync.py` and
httpcore's `unasync.py`): this script rewrites `await`/`async` constructs and async names
into their sync twins, token by token, then formats the result with ruff.

    python tools/async_to_sync.py           # rewrite the generated files
    python tools/async_to_sync.py --check   # exit 1 if any generated file is stale (CI)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "langgraph_durable"

# source -> generated, relative to the package
FILES = {
    "checkpoint/_aconnection.py": "checkpoint/_connection.py",
    "checkpoint/_amigrate.py": "checkpoint/_migrate.py",
    "checkpoint/aio.py": "checkpoint/sync.py",
    "effects/_ajournal.py": "effects/_journal.py",
    "effects/_arunner.py": "effects/_runner.py",
    "approvals/_apending.py": "approvals/_pending.py",
}

# Whole-word replacements, applied in order (longer names first where one contains another).
NAMES = [
    ("AsyncDurablePostgresSaver", "DurablePostgresSaver"),
    ("AsyncPostgresSaver", "PostgresSaver"),
    ("AsyncConnectionSource", "ConnectionSource"),
    ("AsyncConnectionPool", "ConnectionPool"),
    ("AsyncConnection", "Connection"),
    ("AsyncPipeline", "Pipeline"),
    ("AsyncConn", "Conn"),
    ("AsyncIterator", "Iterator"),
    ("AsyncCursor", "Cursor"),
    ("SyncCallsViaLoop", "AsyncCallsRefused"),
    ("asynccontextmanager", "contextmanager"),
    ("_aconnection", "_connection"),
    ("_amigrate", "_migrate"),
    ("amigrate", "migrate"),
    ("acheck_schema", "check_schema"),
    ("asetup", "setup"),
    ("aget_tuple", "get_tuple"),
    ("alist", "list"),
    ("aput_writes", "put_writes"),
    ("aput", "put"),
    ("adelete_thread", "delete_thread"),
    ("adelete_for_runs", "delete_for_runs"),
    ("adelete_idle_threads", "delete_idle_threads"),
    ("acopy_thread", "copy_thread"),
    ("aprune", "prune"),
    ("aget_delta_channel_history", "get_delta_channel_history"),
    ("_amigrate_sends", "_migrate_sends"),
    ("_adelete_threads", "_delete_threads"),
    ("_adelete_unreferenced", "_delete_unreferenced"),
    ("_akeep_latest", "_keep_latest"),
    ("_afetch_rows", "_fetch_rows"),
    ("_astore_writes", "_store_writes"),
    ("_astore_checkpoint", "_store_checkpoint"),
    ("AsyncEffectJournal", "EffectJournal"),
    ("AsyncHeartbeat", "Heartbeat"),
    ("AsyncWriteParking", "WriteParking"),
    ("aextend_lease", "extend_lease"),
    ("checkpoint.aio import", "checkpoint.sync import"),
    ("_ajournal", "_journal"),
    ("_arunner", "_runner"),
    ("arun_effect", "run_effect"),
    ("_arun", "_run"),
    ("_aattempt", "_attempt"),
    ("_areconcile", "_reconcile"),
    ("_arecord_failure", "_record_failure"),
    ("aclaim", "claim"),
    ("aget", "get"),
    ("atake_over", "take_over"),
    ("acomplete", "complete"),
    ("afail", "fail"),
    ("await_retry", "wait_retry"),
    ("amark_unknown", "mark_unknown"),
    ("arelease", "release"),
    ("areplayed", "replayed"),
    ("aallow_retry", "allow_retry"),
    ("asleep", "sleep"),
    ("aresolve", "resolve"),
    ("aopen_effects", "open_effects"),
    ("atoken_ledger", "token_ledger"),
    ("apending_approvals", "pending_approvals"),
    ("aresume_approval", "resume_approval"),
    ("aget_state", "get_state"),
    ("ainvoke", "invoke"),
    ("astream", "stream"),
]

PATTERNS = [
    (re.compile(r"^.*# async-only\b.*\n", re.MULTILINE), ""),
    (re.compile(r"\basync def\b"), "def"),
    (re.compile(r"\basync with\b"), "with"),
    (re.compile(r"\basync for\b"), "for"),
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\bCoroutine\[Any, Any, T\]"), "T"),
    (re.compile(r"\basyncio\.Condition\b"), "threading.Condition"),
    (re.compile(r"\basyncio\.Lock\b"), "threading.Lock"),
    (re.compile(r"\basyncio\.sleep\b"), "time.sleep"),
    (re.compile(r"^import asyncio$", re.MULTILINE), "import threading\nimport time"),
    *((re.compile(rf"\b{re.escape(a)}\b"), b) for a, b in NAMES),
]


def convert(source: str, source_name: str) -> str:
    text = source
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    header = (
        f"# WARNING: generated from {source_name} by tools/async_to_sync.py. DO NOT EDIT.\n"
        "# Edit the async source and run `python tools/async_to_sync.py`.\n"
    )
    return header + text


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
    parser.add_argument("--check", action="store_true", help="fail if a file is stale")
    args = parser.parse_args()
    stale = []
    for source_name, target_name in FILES.items():
        source = PACKAGE / source_name
        target = PACKAGE / target_name
        generated = ruff_format(convert(source.read_text(), source.name), target)
        current = target.read_text() if target.exists() else ""
        if generated != current:
            if args.check:
                stale.append(target_name)
            else:
                target.write_text(generated)
                print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print(
            "stale generated files: "
            + ", ".join(stale)
            + "\nrun `python tools/async_to_sync.py` and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
