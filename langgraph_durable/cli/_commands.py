"""What each CLI command does: one library call (or a few), its result as a JSON object.

Each handler takes the parsed arguments and an open saver and returns a `Result`: the JSON
object `--json` prints, how to show it to a person, and the exit code. Nothing here talks
to the database itself.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph.types import Command

from langgraph_durable._db import source_of
from langgraph_durable._ids import thread_id_of
from langgraph_durable._imports import import_from_here
from langgraph_durable._redact import redact_passwords
from langgraph_durable._sql import QUERIES
from langgraph_durable.approvals import (
    ApprovalDecision,
    PendingApproval,
    answer_from_pending,
    approval_to_answer,
    asked_again,
    pending_approvals,
    refusal_of,
    resume_approval,
    validate_decision,
)
from langgraph_durable.checkpoint import DurablePostgresSaver
from langgraph_durable.cli._output import Progress, print_table, record
from langgraph_durable.effects import EffectJournal, journal_of
from langgraph_durable.errors import (
    ConfigurationError,
    DurableError,
    EffectNotFoundError,
    InvalidDecisionError,
    InvalidInputError,
    NotWaitingError,
    RunConflictError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from langgraph_durable.ops import (
    doctor,
    doctor_summary,
    list_threads,
    plain,
    state_channels,
    thread_diff,
    thread_history,
)
from langgraph_durable.outbox import (
    OutboxRelay,
    backlog,
    events,
    prune_published,
    replay_dead,
    run_relay,
)
from langgraph_durable.outbox.publishers import publisher_for
from langgraph_durable.runs import GraphVersion, Run, RunRegistry, RunStatus

__all__ = ["COMMANDS", "Result", "in_cli_words", "run_json"]

EXIT_RUN_FAILED = 3
EXIT_STILL_RUNNING = 4
EXIT_DOCTOR_WARNINGS = 5
PRUNE_BATCH = 20

PRUNE_DELETE_MAX = 1_000
"""The most threads one `prune --strategy delete` deletes (one transaction, a lock each)."""


@dataclass
class Result:
    """A command's answer: the JSON object, how to print it for people, the exit code."""

    data: dict[str, Any]
    show: Callable[[dict[str, Any]], None] | None = None
    code: int = 0
    notes: list[str] = field(default_factory=list)


def _not_json(constant: str) -> Any:
    raise InvalidInputError(
        f"{constant} is not a JSON number (JSON has no NaN or Infinity); write the value "
        "another way, as a string or null"
    )


def _json_arg(text: str, option: str) -> Any:
    """The option's JSON, strictly: Python's reader also takes NaN and Infinity, which no
    other JSON reader (the console, a receiver) takes back."""
    try:
        return json.loads(text, parse_constant=_not_json)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{option} must be JSON: {exc}; nothing was changed.") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{option} must be JSON ({exc}); nothing was changed.") from exc
    except RecursionError as exc:
        raise InvalidInputError(
            f"{option} is JSON nested too deeply to read; nothing was changed."
        ) from exc


def _journal(saver: DurablePostgresSaver) -> EffectJournal:
    journal = journal_of(saver)
    assert isinstance(journal, EffectJournal)
    return journal


def run_json(runs: RunRegistry, run: Run, *, full: bool = False) -> dict[str, Any]:
    """A run as the CLI shows it (with its input and output when `full`)."""
    data: dict[str, Any] = _errors_redacted(record(run))
    data.pop("stored_input", None)
    data.pop("stored_output", None)
    data["status"] = run.status.value
    if full:
        data["input"] = record(runs.input_of(run))
        data["output"] = record(runs.output_of(run))
    return data


ERROR_FIELDS = ("error_message", "error")
"""Fields holding an application's or a receiver's error text, which may quote a DSN or a
URL with its password."""


def _errors_redacted(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with the passwords in its error texts hidden."""
    return {
        k: redact_passwords(v) if k in ERROR_FIELDS and isinstance(v, str) else v
        for k, v in row.items()
    }


def _error_text(error: BaseException) -> str:
    """`Type: message` of an error raised by the user's code, its passwords hidden."""
    return redact_passwords(f"{type(error).__name__}: {error}")


def _show_kv(data: dict[str, Any]) -> None:
    for key, value in data.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        print(f"{key}: {shown if shown not in ('', None) else '(none)'}")


def _show_run(data: dict[str, Any]) -> None:
    run = data["run"]
    print(
        f"run {run['run_id']}: {run['status']}"
        + (f" ({run['status_reason']})" if run["status_reason"] else "")
    )
    for key in (
        "thread_id",
        "graph_name",
        "graph_version",
        "attempt",
        "max_attempts",
        "owner",
        "step",
        "created_at",
        "started_at",
        "finished_at",
        "retry_at",
        "stuck_since",
        "error_type",
        "error_message",
    ):
        if run.get(key) is not None:
            print(f"  {key}: {run[key]}")
    for key in ("input", "output"):
        if run.get(key) is not None:
            print(f"  {key}: {json.dumps(run[key], default=str)[:400]}")


# -- the database ----------------------------------------------------------------------------


def setup(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    return Result({"applied": saver.setup()}, _show_kv)


def check(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    saver.check_schema()
    return Result({"schema": "ok"}, _show_kv)


_SETUP_CALL = re.compile(r"(call )?`saver\.setup\(\)`")


def in_cli_words(text: str) -> str:
    """A library message as the CLI says it: the command to run (`langgraph-durable
    setup`), not the method a program calls (`saver.setup()`)."""
    return _SETUP_CALL.sub(
        lambda m: ("run " if m.group(1) else "") + "`langgraph-durable setup`", text
    )


def run_doctor(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    found = doctor(saver)
    failures, warnings = doctor_summary(found)
    findings = [{**record(f), "advice": in_cli_words(f.advice)} for f in found]

    def show(data: dict[str, Any]) -> None:
        print_table(data["findings"], ["level", "check", "seen"], empty="")
        # The advice of what is not ok whole, on lines of its own: a table cell cuts it.
        advised = [f for f in data["findings"] if f["level"] != "ok" and f["advice"]]
        if advised:
            print("\nwhat to do:")
        for finding in advised:
            print(f"  {finding['check']} ({finding['level']}): {finding['advice']}")
        if failures:
            verdict = f"problems found ({failures} failed, {warnings} warnings)"
        elif warnings:
            verdict = f"fine, {warnings} warning{'s' if warnings > 1 else ''}"
        else:
            verdict = "fine"
        print("doctor: " + verdict)

    # A warning is not "ok": a script tells it from a failure by the exit code.
    code = 1 if failures else EXIT_DOCTOR_WARNINGS if warnings else 0
    data = {"ok": code == 0, "failures": failures, "warnings": warnings, "findings": findings}
    return Result(data, show, code=code)


# -- threads ---------------------------------------------------------------------------------


def prune(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    if args.strategy == "delete" and len(args.threads) > PRUNE_DELETE_MAX:
        # All or none is one transaction that locks each thread: tens of thousands
        # exhaust the server's lock table (for every other session too).
        raise InvalidInputError(
            f"prune --strategy delete takes at most {PRUNE_DELETE_MAX:,} threads at once "
            f"(all or none, in one transaction that locks each); {len(args.threads):,} "
            "were given. Split the list; nothing was deleted."
        )
    # Asked in SQL: reading a checkpoint would load its values, and the CLI has none of
    # the application's classes imported (the safe loader refuses them).
    with _saver_connection(saver, "checking the threads to prune") as conn:
        missing = [
            t
            for t in args.threads
            if not conn.execute(
                QUERIES["thread_has_checkpoints"], {"thread_id": thread_id_of(t)}
            ).fetchone()["found"]
        ]
    if missing:
        raise ThreadNotFoundError(
            f"No checkpoints for thread(s) {', '.join(map(repr, missing))}; nothing was "
            "pruned. Check the thread ids (and the database)."
        )
    if args.strategy == "delete":
        # One call, all or none in one transaction: batches would each commit, and a busy
        # thread in a later batch would refuse it after the earlier ones were deleted.
        saver.prune(args.threads, strategy="delete")
    else:  # each thread pruned on its own: batches show progress
        progress = Progress(len(args.threads), "pruning")
        for start in range(0, len(args.threads), PRUNE_BATCH):
            batch = args.threads[start : start + PRUNE_BATCH]
            saver.prune(batch, strategy=args.strategy)
            progress.advance(len(batch))
    return Result({"pruned": args.threads, "strategy": args.strategy}, _show_kv)


def delete_idle(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    return Result({"deleted": saver.delete_idle_threads(args.older_than)}, _show_kv)


def threads_list(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    found = [record(t) for t in list_threads(saver, prefix=args.prefix, limit=args.limit)]
    columns = ["thread_id", "step", "checkpoints", "updated_at", "source"]
    return Result(
        {"threads": found},
        lambda d: print_table(d["threads"], columns, empty="no threads"),
    )


def threads_show(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    history = thread_history(saver, args.thread, limit=1)
    (latest,) = history.steps
    configurable = {"thread_id": history.thread_id, "checkpoint_ns": ""}
    found = saver.get_tuple(
        {"configurable": {**configurable, "checkpoint_id": latest.checkpoint_id}}
    )
    if found is None:  # deleted since it was listed
        raise ThreadNotFoundError(f"Thread {args.thread!r} was deleted meanwhile.")
    runs = RunRegistry(saver)
    data = {
        "thread_id": history.thread_id,
        "checkpoint_id": latest.checkpoint_id,
        "step": latest.step,
        "updated_at": latest.created_at,
        "values": plain(state_channels(found.checkpoint["channel_values"])),
        "waiting": latest.waiting,
        "runs": [run_json(runs, r) for r in runs.list(thread_id=args.thread, limit=10)],
    }

    def show(d: dict[str, Any]) -> None:
        print(f"thread {d['thread_id']}: step {d['step']}, checkpoint {d['checkpoint_id']}")
        for key, value in d["values"].items():
            print(f"  {key} = {json.dumps(value, default=str)[:200]}")
        for asked in d["waiting"]:
            print(f"  waiting for an answer: {json.dumps(asked, default=str)[:200]}")
        print_table(d["runs"], ["run_id", "status", "attempt", "created_at"], empty="  no runs")

    return Result(data, show)


def threads_history(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    history = thread_history(saver, args.thread, limit=args.limit)
    data = record(history)
    data["effects"] = [_errors_redacted(effect) for effect in data["effects"]]

    def show(d: dict[str, Any]) -> None:
        by_step: dict[Any, list[dict[str, Any]]] = {}
        for effect in d["effects"]:
            by_step.setdefault(effect["step"], []).append(effect)
        print(f"thread {d['thread_id']}")
        for step in d["steps"]:
            nodes = ", ".join(step["nodes"]) or "-"
            print(f"step {step['step']} [{step['source']}] {nodes}  ({step['checkpoint_id']})")
            for key, value in step["wrote"].items():
                print(f"    wrote {key} = {json.dumps(value, default=str)[:160]}")
            for effect in by_step.pop(step["step"], []):
                replays = f", replayed {effect['replays']}x" if effect["replays"] else ""
                print(
                    f"    effect {effect['effect_name']} [{effect['status']}] attempt "
                    f"{effect['attempt']}{replays}  key {effect['key']}"
                )
            for asked in step["waiting"]:
                print(f"    waiting for an answer: {json.dumps(asked, default=str)[:160]}")
        for effects in by_step.values():
            for effect in effects:
                print(f"effect {effect['effect_name']} [{effect['status']}] key {effect['key']}")
        tokens = d["tokens"]
        print("tokens: " + ", ".join(f"{k} {v}" for k, v in tokens.items()))

    return Result(data, show)


def threads_diff(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    diff = thread_diff(saver, args.thread, before=args.before, after=args.after)

    def show(d: dict[str, Any]) -> None:
        print(f"thread {d['thread_id']}: {d['before'] or '(start)'} -> {d['after']}")
        for key, value in d["added"].items():
            print(f"+ {key} = {json.dumps(value, default=str)[:200]}")
        for key, value in d["removed"].items():
            print(f"- {key} = {json.dumps(value, default=str)[:200]}")
        for key, change in d["changed"].items():
            print(
                f"~ {key}: {json.dumps(change['from'], default=str)[:90]} -> "
                f"{json.dumps(change['to'], default=str)[:90]}"
            )
        if not (d["added"] or d["removed"] or d["changed"]):
            print("no change")

    return Result(diff, show)


# -- runs ------------------------------------------------------------------------------------

RUN_COLUMNS = ["run_id", "status", "graph_name", "thread_id", "attempt", "updated_at"]


def runs_list(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    found = runs.list(
        status=args.status, thread_id=args.thread, graph_name=args.graph, limit=args.limit
    )
    return Result(
        {"runs": [run_json(runs, r) for r in found]},
        lambda d: print_table(d["runs"], RUN_COLUMNS, empty="no runs"),
    )


def runs_show(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    return Result({"run": run_json(runs, runs.get(args.run_id), full=True)}, _show_run)


def runs_wait(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    run, waits = _wait_settled(runs, args.run_id, args.timeout)
    code = _wait_code(run, waits)
    return Result({"run": run_json(runs, run, full=True)}, _show_run, code=code)


def _wait_settled(runs: RunRegistry, run_id: str, timeout: float | None) -> tuple[Run, bool]:
    """The run once `wait_for` returns, and whether it waits at a question someone can
    answer. Those are two reads: a run answered between them (queued again, or finished
    already) is waited for again, not taken for a run that waits for nobody."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        run = runs.wait_for(run_id, timeout=left)
        if run.status is not RunStatus.INTERRUPTED:
            return run, False
        if runs.waits_for_answer(run_id):
            return run, True
        fresh = runs.get(run_id)
        if fresh == run:  # still as read: it waits for nobody
            return run, False
        if deadline is not None and time.monotonic() >= deadline:  # no looking again
            waits = fresh.status is RunStatus.INTERRUPTED and runs.waits_for_answer(run_id)
            return fresh, waits


def _wait_code(run: Run, waits_for_answer: bool) -> int:
    """The exit code for a run waited on: 0 it succeeded or waits at a question someone
    can answer (`waits_for_answer`), `EXIT_RUN_FAILED` it ended otherwise, is blocked, or
    is interrupted waiting for nothing (a newer run went on, or stopped it),
    `EXIT_STILL_RUNNING` not yet."""
    if not run.finished and run.status is not RunStatus.BLOCKED:
        return EXIT_STILL_RUNNING
    if run.status is RunStatus.SUCCESS or (
        run.status is RunStatus.INTERRUPTED and waits_for_answer
    ):
        return 0
    return EXIT_RUN_FAILED


def runs_cancel(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    return Result({"run": run_json(runs, runs.cancel(args.run_id))}, _show_run)


def runs_retry(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    return Result({"run": run_json(runs, runs.retry(args.run_id))}, _show_run)


def runs_resume(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    value = _json_arg(args.value, "--value")
    return Result(
        {"run": run_json(runs, runs.resume(args.run_id, Command(resume=value)))}, _show_run
    )


def workers(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    found = [record(w) for w in RunRegistry(saver).workers(live_seconds=args.live_seconds)]
    columns = ["worker_id", "live", "graphs", "heartbeat_at"]
    return Result(
        {"workers": found}, lambda d: print_table(d["workers"], columns, empty="no workers")
    )


def stuck(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    runs = RunRegistry(saver)
    found = [run_json(runs, r) for r in runs.stuck(limit=args.limit)]
    columns = ["run_id", "status", "graph_name", "thread_id", "stuck_since", "last_progress_at"]
    return Result({"runs": found}, lambda d: print_table(d["runs"], columns, empty="no stuck runs"))


# -- effects ---------------------------------------------------------------------------------

EFFECT_COLUMNS = ["status", "attempt", "key", "effect_name", "thread_id", "node", "error_type"]


def effects_list(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    rows = [
        _errors_redacted(record(r)) for r in _journal(saver).open_effects(args.thread, args.limit)
    ]

    def show(d: dict[str, Any]) -> None:
        # A running attempt whose lease lapsed died without an outcome: unknown, to resolve.
        shown = [
            {**r, "status": "running, lease lapsed"} if r.get("lease_lapsed") else r
            for r in d["effects"]
        ]
        print_table(shown, EFFECT_COLUMNS, empty="no open effects")

    return Result({"effects": rows}, show)


def effects_show(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    row = _journal(saver).details(args.key)
    if row is None:
        raise EffectNotFoundError(f"No effect with key {args.key!r} in this database.")
    return Result({"effect": _errors_redacted(record(row))}, lambda d: _show_kv(d["effect"]))


def resolve(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    journal = _journal(saver)
    if journal.get(args.key) is None:
        raise EffectNotFoundError(f"No effect with key {args.key!r} in this database.")
    if args.completed is not None:
        completed = _json_arg(args.completed, "--completed")
        journal.resolve(args.key, completed=completed, attempt=args.attempt)
    elif args.failed is not None:
        journal.resolve(args.key, failed=args.failed, attempt=args.attempt)
    else:
        journal.resolve(args.key, allow_retry=True, attempt=args.attempt)
    return Result({"resolved": args.key}, _show_kv)


# -- approvals -------------------------------------------------------------------------------


def _pending_json(waiting: PendingApproval) -> dict[str, Any]:
    return {
        "thread_id": waiting.thread_id,
        "checkpoint_id": waiting.checkpoint_id,
        "interrupt_id": waiting.interrupt_id,
        "task_id": waiting.task_id,
        "is_approval": waiting.is_approval,
        "waiting_since": record(waiting.waiting_since),
        "age_seconds": None if waiting.age is None else waiting.age.total_seconds(),
        "value": record(waiting.value),
    }


def approvals_list(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    waiting = pending_approvals(saver, thread_id=args.thread, limit=args.limit)

    def show(d: dict[str, Any]) -> None:
        rows = [
            {
                "thread_id": a["thread_id"],
                "interrupt_id": a["interrupt_id"],
                "waiting": str(timedelta(seconds=round(a["age_seconds"] or 0))),
                "asks": a["value"].get("request", a["value"])
                if isinstance(a["value"], dict)
                else a["value"],
            }
            for a in d["approvals"]
        ]
        columns = ["thread_id", "interrupt_id", "waiting", "asks"]
        print_table(rows, columns, empty="no thread is waiting")

    return Result({"approvals": [_pending_json(w) for w in waiting]}, show)


def _load_graph(spec: str, saver: DurablePostgresSaver) -> Any:
    """The graph `--graph MODULE:ATTRIBUTE` names: a compiled graph, or a function that
    makes one (or a `GraphVersion`) from the CLI's saver, or from nothing."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInputError(
            f"--graph {spec!r}: use MODULE:ATTRIBUTE, e.g. myapp.graphs:refunds."
        )
    # Anything the import or the call raises is the user's code or spec at fault (a
    # relative name is a TypeError, a class that wants other arguments too): one line.
    try:
        found = getattr(import_from_here(module_name), attribute)
    except Exception as exc:
        raise ConfigurationError(
            f"--graph {spec!r} could not be loaded ({_error_text(exc)}); give an absolute "
            "MODULE:ATTRIBUTE, e.g. myapp.graphs:refunds."
        ) from exc
    if callable(found) and not hasattr(found, "invoke"):
        try:
            takes_saver = len(inspect.signature(found).parameters) >= 1
            found = found(saver) if takes_saver else found()
        except DurableError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"--graph {spec!r}: calling it failed ({_error_text(exc)}); give a compiled "
                "graph, or a function of the saver (or of nothing) that returns one."
            ) from exc
    graph = found.graph if isinstance(found, GraphVersion) else found
    if not hasattr(graph, "invoke"):
        raise ConfigurationError(
            f"--graph {spec!r} is not a compiled graph (nor a function that returns one)."
        )
    return graph


def _decide(args: argparse.Namespace, saver: DurablePostgresSaver, approved: bool) -> Result:
    decision: ApprovalDecision = validate_decision(
        {
            "approved": approved,
            "approver": args.approver,
            "comment": args.comment,
            "amended": _json_arg(args.amend, "--amend") if getattr(args, "amend", None) else {},
        }
    )
    # The graph is loaded first: the questions are listed as close to the answer as can be.
    graph = _load_graph(args.graph, saver) if args.graph else None
    pending = pending_approvals(saver, thread_id=args.thread)
    answer = answer_from_pending(pending, args.thread, decision, interrupt_id=args.interrupt)
    answered = approval_to_answer(pending, args.thread, interrupt_id=args.interrupt)
    data: dict[str, Any] = {"thread_id": args.thread, "decision": record(decision)}
    run_code = 0
    if graph is not None:
        data["via"] = "graph"
        try:
            resume_approval(graph, args.thread, decision, interrupt_id=args.interrupt)
        except (NotWaitingError, InvalidDecisionError, RunConflictError, ThreadBusyError):
            raise  # checked before anything was sent
        except Exception as exc:  # the graph failed after the answer: as a run that failed
            data["error"] = _error_text(exc)
            run_code = EXIT_RUN_FAILED
    else:
        runs = RunRegistry(saver)
        # No answer while the thread's newest run has not finished: an interrupted run
        # would be answered under a newer run still on its way.
        newest = runs.list(thread_id=args.thread, limit=1)
        if newest and not newest[0].finished:
            raise NotWaitingError(
                f"Thread {args.thread!r} has a run on its way (an answer sent before, or a "
                f"newer run): its run {newest[0].run_id} is {newest[0].status.value}. Wait "
                f"for it (`langgraph-durable runs wait {newest[0].run_id}`), then list the "
                "thread's approvals again."
            )
        waiting = runs.list(thread_id=args.thread, status=RunStatus.INTERRUPTED, limit=1)
        if not waiting:
            raise NotWaitingError(
                f"Thread {args.thread!r} waits for an approval, but no interrupted run of the "
                "run registry holds it: pass --graph MODULE:ATTRIBUTE to run the graph here, "
                "or answer it in Python with resume_approval."
            )
        run = runs.resume(waiting[0].run_id, Command(resume=answer), question=answered.interrupt_id)
        try:
            run, waits = _wait_settled(runs, run.run_id, args.timeout)
        except KeyboardInterrupt:  # Ctrl-C while waiting: the answer is queued all the same
            raise KeyboardInterrupt(
                f"the answer was queued to run {run.run_id}, which goes on without this "
                f"command; `langgraph-durable runs wait {run.run_id}` follows it"
            ) from None
        data["via"] = "run"
        data["run"] = run_json(runs, run)
        run_code = _wait_code(run, waits)
    # The verdict comes from what waits now, not from the run's status: the question still
    # waiting under its id was not judged (no worker took the answer by --timeout, or a
    # newer run stopped this one); asked again with a reason, it was refused (authorize,
    # revalidate); gone, it was accepted, whatever the run does next.
    after = pending_approvals(saver, thread_id=args.thread)
    if any(p.interrupt_id == answered.interrupt_id for p in after):
        data["accepted"] = data["refused"] = None
        code = run_code or (EXIT_RUN_FAILED if "run" in data else 1)
    else:
        again = asked_again(after, answered, pending)
        data["refused"] = refusal_of(again) if again is not None else None
        data["accepted"] = data["refused"] is None
        code = 1 if data["refused"] else run_code

    def show(d: dict[str, Any]) -> None:
        verdict = "approved" if approved else "rejected"
        failed = f"  the graph failed: {d['error']}" if "error" in d else None
        if d["accepted"] is None:
            if "run" not in d:
                print(f"thread {d['thread_id']}: the answer was sent; the question still waits")
                if failed:
                    print(failed)
                return
            run_id, status = d["run"]["run_id"], d["run"]["status"]
            print(f"thread {d['thread_id']}: answer sent to run {run_id}, now {status}")
            print(f"  not judged yet; see `langgraph-durable runs show {run_id}`")
            return
        if d["refused"]:
            print(f"thread {d['thread_id']}: not accepted: {d['refused']}")
        else:
            print(f"thread {d['thread_id']}: {verdict} by {args.approver}")
        if "run" in d:
            print(f"  run {d['run']['run_id']}: {d['run']['status']}")
        if failed:
            print(failed)

    return Result(data, show, code=code)


def approve(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    return _decide(args, saver, True)


def reject(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    return _decide(args, saver, False)


# -- the outbox ----------------------------------------------------------------------------


def _saver_connection(saver: DurablePostgresSaver, doing: str) -> Any:
    """A connection of the saver's pool, its driver errors named (a role without the
    outbox's grants, a lost server) like every other command's."""
    return source_of(saver).connection(doing)


def outbox_relay(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    relay = OutboxRelay(
        args.dsn, publisher_for(args.url, target=args.target), max_attempts=args.max_attempts
    )
    run_relay(relay)
    return Result({"relay": "stopped"}, _show_kv)


def outbox_backlog(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    with _saver_connection(saver, "reading the outbox's backlog") as conn:
        return Result(record(backlog(conn)), _show_kv)


def outbox_dead(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    with _saver_connection(saver, "reading the outbox's dead events") as conn:
        rows = [record(r) for r in events(conn, status="dead", limit=args.limit)]
    columns = ["event_id", "event_type", "key", "attempts", "last_error"]
    return Result({"dead": rows}, lambda d: print_table(d["dead"], columns, empty="no dead events"))


def outbox_replay(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    with _saver_connection(saver, "replaying dead outbox events") as conn:
        return Result({"replayed": replay_dead(conn, args.event_ids or None)}, _show_kv)


def outbox_prune(args: argparse.Namespace, saver: DurablePostgresSaver) -> Result:
    with _saver_connection(saver, "pruning published outbox events") as conn:
        pruned = prune_published(conn, args.older_than.total_seconds())
    return Result({"pruned": pruned}, _show_kv)


COMMANDS: dict[
    tuple[str, str | None], Callable[[argparse.Namespace, DurablePostgresSaver], Result]
] = {
    ("setup", None): setup,
    ("check", None): check,
    ("doctor", None): run_doctor,
    ("prune", None): prune,
    ("delete-idle", None): delete_idle,
    ("threads", "list"): threads_list,
    ("threads", "show"): threads_show,
    ("threads", "history"): threads_history,
    ("threads", "diff"): threads_diff,
    ("runs", "list"): runs_list,
    ("runs", "show"): runs_show,
    ("runs", "wait"): runs_wait,
    ("runs", "cancel"): runs_cancel,
    ("runs", "retry"): runs_retry,
    ("runs", "resume"): runs_resume,
    ("workers", None): workers,
    ("stuck", None): stuck,
    ("effects", None): effects_list,
    ("effects", "list"): effects_list,
    ("effects", "show"): effects_show,
    ("effects", "resolve"): resolve,
    ("resolve", None): resolve,
    ("approvals", None): approvals_list,
    ("approvals", "list"): approvals_list,
    ("approvals", "approve"): approve,
    ("approvals", "reject"): reject,
    ("outbox", "relay"): outbox_relay,
    ("outbox", "backlog"): outbox_backlog,
    ("outbox", "dead"): outbox_dead,
    ("outbox", "replay"): outbox_replay,
    ("outbox", "prune"): outbox_prune,
}
"""Every command that needs the database, by (command, action)."""
