"""One call of an effect, as prepared by `@effect` and carried out by the runners."""

from __future__ import annotations

import inspect
import itertools
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph_durable import _telemetry
from langgraph_durable._redact import redact_passwords
from langgraph_durable.effects._keys import TaskContext
from langgraph_durable.effects._policy import RetryPolicy
from langgraph_durable.effects._protocol import JournalRow
from langgraph_durable.effects._rows import completion_event_of
from langgraph_durable.errors import ConfigurationError

__all__ = [
    "EffectCall",
    "NothingSentError",
    "effect_span_attributes",
    "error_outcome",
    "failed_message",
    "record_outcome",
    "refuse_awaitable",
    "unknown_message",
]


_call_prefix = (os.getpid(), secrets.token_hex(4))
_call_numbers = itertools.count()


def next_call_token() -> str:
    """A token no other call of this process had: a random prefix drawn once per process,
    then a counter. A forked child keeps its parent's journal, and so its lease owner, and
    its counter: it draws a prefix of its own once it sees its own pid (also after a fork
    made outside Python, as a prefork server's, which runs no fork hooks). A `uuid4` per
    call read the OS's random source on every effect call."""
    global _call_prefix
    pid, prefix = _call_prefix
    if pid != os.getpid():
        _call_prefix = (os.getpid(), secrets.token_hex(4))
        prefix = _call_prefix[1]
    return f"{prefix}{next(_call_numbers):x}"


@dataclass(frozen=True)
class EffectCall:
    """Everything needed to run one call of an effect.

    Attributes:
        may_reattempt: Asked before an attempt whose predecessor's outcome is unknown:
            `(journal, row) -> None` to go ahead, or the reason not to (may be async for
            async effects). The model ledger uses it for its token budget.
        call_site: (file, line) of the user code that called the effect, for reports.
        cost_only: A call whose repetition costs money but acts on nothing (a model call):
            an open outcome is a lost answer, and messages say so.
        completion_event: An outbox event type stored with the completion.
    """

    name: str
    key: str
    input_hash: str
    policy: RetryPolicy
    lease_seconds: float
    wait_seconds: float
    where: TaskContext | None
    invoke: Callable[[str], Any]
    reconcile: Callable[[str], Any] | None
    usage_of: Callable[[Any], dict[str, Any] | None] | None = None
    guarded: bool = True
    may_reattempt: Callable[[Any, JournalRow], Any] | None = None
    call_site: tuple[str, int] | None = None
    cost_only: bool = False
    completion_event: str | None = None
    """An outbox event type stored with the completion (`@effect(event=...)`)."""
    default_key: bool = False
    """The key was derived from the thread (no `key=`): deleting the thread may delete
    its journal row. A business key (`key=`) may be shared by threads: its row stays."""
    token: str = field(default_factory=next_call_token)
    """This call among others of this process, in the lease owner (`owner#token`)."""


def effect_span_attributes(call: EffectCall) -> dict[str, Any]:
    """What an effect's span carries: its name, key and where it was called."""
    return {
        "langgraph_durable.effect.name": call.name,
        "langgraph_durable.effect.key": call.key,
        "langgraph_durable.thread_id": call.where.thread_id if call.where else None,
        "langgraph_durable.node": call.where.node if call.where else None,
    }


def record_outcome(call: EffectCall, outcome: str, row: JournalRow | None = None) -> None:
    """An effect call's outcome on its span and in the metrics; a replayed model call
    counts the tokens it did not pay again."""
    _telemetry.annotate({"langgraph_durable.effect.outcome": outcome})
    _telemetry.count(
        "langgraph_durable.effect.calls",
        1,
        {"effect": call.name, "outcome": outcome},
        "Effect calls by outcome: completed, replayed, reconciled, failed, unknown, deferred",
    )
    usage = (row.extra.get("usage") if row is not None else None) or {}
    if outcome == "replayed" and usage:
        saved = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        _telemetry.count(
            "langgraph_durable.tokens.saved",
            saved,
            {"effect": call.name},
            "Tokens of model calls replayed from the journal instead of paid again",
        )


def error_outcome(exc: BaseException) -> str:
    """The outcome an effect call that raised `exc` had, by its error's name."""
    name = type(exc).__name__
    return {
        "EffectDeferred": "deferred",
        "EffectOutcomeUnknown": "unknown",
        "EffectResultNotStoredError": "unknown",
        "EffectFailedError": "failed",
        "EffectInProgressError": "in_progress",
    }.get(name, "error")


class NothingSentError(ConfigurationError):
    """A sync effect returned a coroutine instead of running it: nothing was sent."""


def completion_events(call: EffectCall, result: Any) -> dict[str, Any]:
    """`acomplete`'s keyword for the call's completion event: none, or one per key
    (`_rows.completion_event_of`)."""
    if call.completion_event is None:
        return {}
    thread = call.where.thread_id if call.where is not None else None
    return {
        "events": [completion_event_of(call.completion_event, call.key, call.name, thread, result)]
    }


STORE_PAUSE_FIRST = 0.1
"""Seconds before trying again to store a result the database could not take (doubling)."""
STORE_PAUSE_MAX = 5.0
"""The longest pause between tries to store a result while the database is away."""


def refuse_awaitable(call: EffectCall, value: Any) -> Any:
    """`value`, unless it is an awaitable a sync effect returned instead of running it."""
    if not inspect.isawaitable(value):
        return value
    if inspect.iscoroutine(value):
        value.close()
    raise NothingSentError(
        f"Effect {call.name!r} returned {type(value).__name__} instead of a result: it runs "
        "as a sync effect (an object with an async __call__, or a lambda that returns a "
        "coroutine, looks sync to @effect). Make it an `async def`. Nothing was sent."
    )


_RESOLVE_HINT = (
    "Check the receiver by this key, then resolve it (`langgraph-durable resolve KEY "
    "--completed JSON | --allow-retry | --failed REASON`, or EffectJournal.resolve(key, "
    "completed=... | allow_retry=True | failed=...)) and resume the thread with "
    "invoke(None, config): do not send the input again, which would start a new run with "
    "new keys."
)


def unknown_message(call: EffectCall, row: JournalRow, reason: str) -> str:
    """The message of `EffectOutcomeUnknown` for a row nothing may resolve automatically."""
    if call.cost_only:
        lost = (
            f"ended in {row.error_type} ({redact_passwords(row.error_message or '')})"
            if row.error_type
            else "died before its answer was stored"
        )
        return (
            f"Model call {call.name!r} (key {call.key!r}): attempt {row.attempt} {lost}; the "
            f"answer is lost and may have been paid for. Not asked again: {reason}. To ask "
            "again, `langgraph-durable resolve KEY --allow-retry` (or EffectJournal.resolve("
            "key, allow_retry=True)), then resume the thread with invoke(None, config)."
        )
    if row.error_type and row.error_message is not None:
        what = (
            f"attempt {row.attempt} ended in {row.error_type} "
            f"({redact_passwords(row.error_message)}) after "
            "the request may have gone out"
        )
    else:
        what = f"attempt {row.attempt} started and never recorded an outcome"
    because = f" Not retried on its own: {reason}." if reason else ""
    automatic = (
        " A reconcile= hook, or retry='idempotent' when the receiver honours the key, "
        "resolves this automatically."
    )
    return (
        f"Effect {call.name!r} (key {call.key!r}): {what}, so the receiver may or may not "
        f"have acted.{because} {_RESOLVE_HINT}{automatic}"
    )


def failed_message(call: EffectCall, error_type: str | None, error: str | None) -> str:
    """The message of `EffectFailedError` for a journaled terminal failure (its stored
    error text quoted with passwords hidden, as every error of ours)."""
    shown = None if error is None else redact_passwords(error)
    return (
        f"Effect {call.name!r} (key {call.key!r}) failed before with {error_type}: {shown}. "
        "The failure is journaled; replays raise it again. To let it try again, resolve it "
        "(`langgraph-durable resolve KEY --allow-retry`, or EffectJournal.resolve(key, "
        "allow_retry=True)); if it did act after all, resolve it with completed=<result>."
    )
