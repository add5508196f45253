"""Running one effect call against the journal.

Async source: the sync twin is generated from this file.

The order is the product (invariants I1-I3): the journal row is committed before the
callable runs; a completed key is replayed, never called; an attempt whose outcome is
open (it timed out, or died) is reconciled through the hook, retried only when the
receiver honours the key, or stops the run with `EffectOutcomeUnknown`. Every decision is
taken by the pure functions of `_protocol.py`; this module only carries them out.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from datetime import datetime, timedelta
from typing import Any

from langgraph.errors import GraphBubbleUp

from langgraph_durable import _crashpoints, _guard, _telemetry
from langgraph_durable._db import AsyncHeartbeat, afinish_despite_cancel, owner_is_dead
from langgraph_durable._inflight import aeffects_may_start, effect_under_way
from langgraph_durable._redact import redact_passwords
from langgraph_durable._wakeups import asked_to_wake
from langgraph_durable.effects._ajournal import AsyncEffectJournal
from langgraph_durable.effects._call import (
    STORE_PAUSE_FIRST,
    STORE_PAUSE_MAX,
    EffectCall,
    NothingSentError,
    completion_events,
    effect_span_attributes,
    error_outcome,
    failed_message,
    record_outcome,
    refuse_awaitable,
    unknown_message,
)
from langgraph_durable.effects._keys import current_key
from langgraph_durable.effects._policy import Reconciled
from langgraph_durable.effects._protocol import (
    OUTCOME_OPEN_STATUSES,
    RESULT_NOT_STORED,
    Action,
    EffectStatus,
    Failure,
    after_absent,
    decide,
    on_failure,
    pause_before_looking_again,
)
from langgraph_durable.effects._rows import error_message_of
from langgraph_durable.errors import (
    DatabaseUnreachableError,
    EffectDeferred,
    EffectError,
    EffectFailedError,
    EffectInProgressError,
    EffectOutcomeUnknown,
    EffectResultNotStoredError,
    FencedOutError,
)

__all__ = ["arun_effect"]

logger = logging.getLogger("langgraph_durable.effects")


async def _maybe_await(value: Any) -> Any:
    """What a callable returned, awaited in the async flavour; the sync flavour returns it
    as is, and `refuse_awaitable` refuses a coroutine a sync effect returned."""
    if inspect.isawaitable(value):
        return await value
    return value


async def arun_effect(journal: AsyncEffectJournal, call: EffectCall) -> Any:
    """Run `call` at most once per key, by the journal's rules; returns the result."""
    if not _telemetry.tracing():  # no span to make: not even its attributes
        result = await _arun_recorded(journal, call)
    else:
        with _telemetry.span("langgraph_durable.effect", effect_span_attributes(call)):
            result = await _arun_recorded(journal, call)
    if call.where is not None and call.guarded:
        # Done (or replayed): an interrupt() later in this task comes after an effect.
        _guard.effect_performed(call.where.task_id, call.where.node, call.name, call.call_site)
    return result


async def _arun_recorded(journal: AsyncEffectJournal, call: EffectCall) -> Any:
    """`_arun`, with the outcome of a call that raised recorded."""
    try:
        return await _arun(journal, call)
    except GraphBubbleUp:
        raise  # an interrupt: the node runs again and calls again
    except Exception as exc:
        record_outcome(call, error_outcome(exc))
        raise


async def _amay_start() -> None:
    """Not once SIGTERM is stopping this worker's run (`_inflight.py`); but always inside
    another effect's attempt (its body calls this one), which SIGTERM lets finish."""
    if current_key.get() is None:
        await aeffects_may_start()


async def _aclaim(journal: AsyncEffectJournal, call: EffectCall) -> int | None:
    """Claim the call's key for a first attempt: its number, or None if the key exists."""
    await _amay_start()
    try:
        return await journal.aclaim(
            call.key,
            call.name,
            call.input_hash,
            call.lease_seconds,
            call.where,
            call.token,
            completion_event=call.completion_event,
            default_key=call.default_key,
        )
    except (Exception, GeneratorExit):
        raise  # the claim failed, or its reply was lost: `_arun` looks at the row
    except BaseException:
        # Cancelled (or interrupted) while the claim was under way: it may have committed,
        # and this call will attempt nothing under it. Let go of it at once if it is this
        # call's, rather than leave it running until its lease ends, to be found unknown
        # then though nothing was sent. Best effort, and a second cancel (Ctrl-C) stops it:
        # the lease still ends if it does not happen.
        with contextlib.suppress(Exception):
            await journal.arelease(call.key, 1, owner=journal.owner_of(call.token))
        raise


async def _arun(journal: AsyncEffectJournal, call: EffectCall) -> Any:
    attempt = await _aclaim(journal, call)
    first_seen: datetime | None = None
    last_error: BaseException | None = None
    tries = 0
    while True:
        if attempt is not None:
            tries += 1
            with effect_under_way():  # a worker's SIGTERM lets it finish (`_inflight.py`)
                done, result, last_error = await _aattempt(journal, call, attempt, tries)
            if done:
                return result
            attempt = None
            continue
        row = await journal.aget(call.key)
        if row is None:  # released between our insert and our read (or fenced out)
            await _acheck_lease(journal, call)
            attempt = await _aclaim(journal, call)
            continue
        assert row.db_now is not None
        now = row.db_now
        first_seen = first_seen or now
        decision = decide(
            row,
            name=call.name,
            input_hash=call.input_hash,
            policy=call.policy,
            has_reconcile=call.reconcile is not None,
            now=now,
            owner_dead=row.status is EffectStatus.RUNNING and owner_is_dead(row.lease_owner),
            mine=row.lease_owner == journal.owner_of(call.token),
            waited=now - first_seen,
            wait_limit=timedelta(seconds=call.wait_seconds),
        )
        action = decision.action
        if action is Action.REPLAY:
            await journal.areplayed(call.key)
            record_outcome(call, "replayed", row)
            return journal.load_result(row)
        if action is Action.RAISE_FAILED:
            raise EffectFailedError(
                failed_message(call, row.error_type, row.error_message),
                key=call.key,
                error_type=row.error_type,
            )
        if action is Action.RAISE_DEFERRED:
            asked_to_wake(decision.until)  # beside a parallel branch's (`_wakeups.py`)
            raise EffectDeferred(
                f"Effect {call.name!r} (key {call.key!r}) is rate limited until "
                f"{decision.until}; retry the run after that time.",
                key=call.key,
                retry_at=decision.until,
            )
        if action is Action.RAISE_IN_PROGRESS:
            asked_to_wake(row.lease_expires_at)
            raise EffectInProgressError(
                f"Effect {call.name!r} (key {call.key!r}) is being attempted by "
                f"{row.lease_owner} (lease until {row.lease_expires_at}); waited "
                f"{call.wait_seconds:g}s. Retry later.",
                key=call.key,
                lease_expires_at=row.lease_expires_at,
            )
        if action is Action.ATTEMPT:
            # Our own claim committed, but its reply was lost (a dropped connection).
            attempt = row.attempt
            continue
        if action is Action.RAISE_UNKNOWN:
            running = row.status is EffectStatus.RUNNING
            if running and not await journal.amark_unknown(call.key, row.attempt):
                continue  # the attempt finished (or was taken over) meanwhile: look again
            raise EffectOutcomeUnknown(
                unknown_message(call, row, decision.reason), key=call.key
            ) from last_error
        if action is Action.WAIT:
            await journal.asleep(pause_before_looking_again(decision.until, now))
            continue
        if action is Action.RECONCILE:
            found = await _areconcile(call)
            if found.found:
                if await journal.acomplete(
                    call.key,
                    row.attempt,
                    found.result,
                    usage=call.usage_of(found.result) if call.usage_of else None,
                    seen_statuses=OUTCOME_OPEN_STATUSES,
                    resolved_by="reconcile",
                    **completion_events(call, found.result),
                ):
                    logger.info("effect %s reconciled as completed", call.key)
                    record_outcome(call, "reconciled")
                    return found.result
                continue  # the row changed meanwhile: look again
            decision = after_absent(row, call.policy)
            if decision.action is Action.FAIL:
                reason = f"reconciled as absent: {decision.reason}"
                failed = await journal.afail(
                    call.key,
                    row.attempt,
                    row.error_type or "ReconciledAbsent",
                    f"{row.error_message or ''} ({reason})".strip(),
                    seen_statuses=OUTCOME_OPEN_STATUSES,
                    resolved_by="reconcile",
                )
                if not failed:
                    continue  # the row changed meanwhile: look again
                raise EffectFailedError(
                    failed_message(call, row.error_type, reason),
                    key=call.key,
                    error_type=row.error_type,
                ) from last_error
            logger.info("effect %s reconciled as absent; attempting again", call.key)
        elif row.status in OUTCOME_OPEN_STATUSES and call.may_reattempt is not None:
            refused = await _maybe_await(call.may_reattempt(journal, row))
            if refused:
                raise EffectOutcomeUnknown(
                    unknown_message(call, row, refused), key=call.key
                ) from last_error
        # TAKE_OVER, or a reconcile that found nothing: the next attempt, if still as seen.
        await _amay_start()
        attempt = await journal.atake_over(
            call.key, row.attempt, row.status, call.lease_seconds, call.token, where=call.where
        )
        if attempt is None:  # the row changed meanwhile (look again), or fenced out
            await _acheck_lease(journal, call)


async def _acheck_lease(journal: AsyncEffectJournal, call: EffectCall) -> None:
    """Raise `FencedOutError` when a claim or takeover under a thread lease changed
    nothing because the lease is gone: the run was taken over, cancelled, timed out or
    superseded. Under durability "async" or "exit" LangGraph runs the next steps before
    the fenced checkpoint write fails, so the fence at the claim is what keeps a fenced-out
    run's effects from acting (I5)."""
    where = call.where
    if where is None or where.fence_token is None or await journal.alease_held(where):
        return
    raise FencedOutError(
        f"Effect {call.name!r} (key {call.key!r}) was not attempted: this run no longer "
        f"holds thread {where.thread_id!r} (another worker took the run over, or it was "
        "cancelled, timed out or superseded by a newer run). Nothing was sent; the run's "
        "status in the registry says what happened to it."
    )


async def _areconcile(call: EffectCall) -> Reconciled:
    assert call.reconcile is not None
    found = await _maybe_await(call.reconcile(call.key))
    if not isinstance(found, Reconciled):
        raise EffectError(
            f"The reconcile hook of effect {call.name!r} returned {found!r}; return "
            "Reconciled.completed(result) or Reconciled.absent().",
            key=call.key,
        )
    return found


async def _aattempt(
    journal: AsyncEffectJournal, call: EffectCall, attempt: int, tries: int
) -> tuple[bool, Any, BaseException | None]:
    """One attempt: (done, its result, the error it journaled when not done)."""
    _crashpoints.reached("effect:after_claim")
    token = current_key.set(call.key)
    returned = False
    interrupted: BaseException | None = None
    try:

        async def beat() -> None:
            if not await journal.aextend_lease(call.key, attempt, call.lease_seconds):
                logger.warning(
                    "effect %s: attempt %d lost its lease; its outcome will not be recorded",
                    call.key,
                    attempt,
                )

        heartbeat = AsyncHeartbeat(beat, call.lease_seconds / 3, call.key)
        async with heartbeat.running():
            result = refuse_awaitable(call, await _maybe_await(call.invoke(call.key)))
            returned = True
    except (GraphBubbleUp, NothingSentError):
        # Control flow, not a failure (an interrupt re-runs the node, which calls again), or
        # a sync effect that returned a coroutine it never ran: the next call starts afresh.
        await journal.arelease(call.key, attempt)
        raise
    except Exception as exc:
        if not await _arecord_failure(journal, call, attempt, tries, exc):
            raise
        return False, None, exc
    except BaseException as exc:
        if not returned:
            # Cancelled, or the process is being interrupted: the call may have gone out.
            # Journal that at once (best effort) rather than leave the lease to run out.
            with contextlib.suppress(Exception):
                await _arecord_failure(journal, call, attempt, tries, exc)
            raise
        # Interrupted as the heartbeat stopped, the body's result in hand: stored below.
        interrupted = exc
    finally:
        current_key.reset(token)
    _crashpoints.reached("effect:after_call")
    usage = call.usage_of(result) if call.usage_of else None
    try:
        # The receiver has acted: its result is stored even if the caller is interrupted
        # meanwhile (the interruption goes on after it), else the attempt would stay
        # running and read as unknown once its lease ended.
        completed = await afinish_despite_cancel(
            lambda: _astore_result(journal, call, attempt, result, usage)
        )
    except EffectResultNotStoredError as exc:
        # The receiver acted; without its result no replay is possible, and calling it
        # again could act twice. Park the row for a decision.
        marked = await journal.amark_unknown(
            call.key, attempt, error_type=RESULT_NOT_STORED, error_message=str(exc)
        )
        where = (
            "The attempt is journaled as unknown and will not be attempted again on its own."
            if marked
            else "The attempt had lost its lease meanwhile; look at the journal row."
        )
        raise EffectResultNotStoredError(
            f"Effect {call.name!r} (key {call.key!r}) acted, but its result (a "
            f"{type(result).__name__}) cannot be serialized: {exc.__cause__}. {where} Make "
            "the effect return plain data, then resolve the key (`langgraph-durable "
            "resolve KEY --completed JSON`, or EffectJournal.resolve(key, completed=...)) "
            "and resume with invoke(None, config).",
            key=call.key,
        ) from exc
    if not completed:
        logger.warning(
            "effect %s: attempt %d finished after another worker took it over",
            call.key,
            attempt,
        )
    _crashpoints.reached("effect:after_result")
    record_outcome(call, "completed")
    if interrupted is not None:
        raise interrupted
    return True, result, None


async def _astore_result(
    journal: AsyncEffectJournal,
    call: EffectCall,
    attempt: int,
    result: Any,
    usage: dict[str, Any] | None,
) -> bool:
    """Store the receiver's result, waiting out a database outage; False if the attempt
    was taken over meanwhile.

    The receiver has acted and its result is in hand: storing it is the one thing left.
    Raising instead would leave the attempt `running` under this live process's lease, and
    whoever runs the thread next would wait for that lease to end (`lease_ttl`) and then
    find the outcome unknown. Gives up (raises) once the attempt's lease has passed, in
    the journal's time or in real time: another worker may have taken it over by then.
    """
    started = time.monotonic()
    waited, pause = 0.0, STORE_PAUSE_FIRST
    while True:
        try:
            return await journal.acomplete(
                call.key, attempt, result, usage=usage, **completion_events(call, result)
            )
        except DatabaseUnreachableError as exc:
            if max(waited, time.monotonic() - started) >= call.lease_seconds:
                raise
            logger.warning(
                "effect %s: its result cannot be stored yet (%s); trying again in %.1f s",
                call.key,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                pause,
            )
            await journal.asleep(pause)
            waited += pause
            pause = min(pause * 2, STORE_PAUSE_MAX)


async def _arecord_failure(
    journal: AsyncEffectJournal, call: EffectCall, attempt: int, tries: int, exc: BaseException
) -> bool:
    """Journal a failed attempt; True when the caller should look at the row again."""
    step = on_failure(exc, attempt=attempt, policy=call.policy, tries=tries)
    # For the logs only: what the journal stores is shown redacted by the tools that read it.
    error = redact_passwords(f"{type(exc).__name__}: {error_message_of(exc)}")
    if step.kind is Failure.DEFER:
        retry_at = await journal.await_retry(
            call.key, attempt, status=EffectStatus.DEFERRED, delay_seconds=step.delay, error=exc
        )
        when = (
            f"retry after {retry_at}"
            if retry_at is not None
            else "no retry time was recorded (the attempt was taken over meanwhile); retry "
            "the run later"
        )
        asked_to_wake(retry_at)
        raise EffectDeferred(
            f"Effect {call.name!r} (key {call.key!r}) was rate limited; {when}.",
            key=call.key,
            retry_at=retry_at,
        ) from exc
    if step.kind is Failure.RETRY_LATER:
        # Nothing happened at the receiver: the key stays free, only this call gives up.
        await journal.await_retry(
            call.key, attempt, status=EffectStatus.RETRY_WAIT, delay_seconds=step.delay, error=exc
        )
        return False
    if step.kind is Failure.RETRY:
        logger.info(
            "effect %s attempt %d: %s, before anything was sent; retrying in %.2fs",
            call.key,
            attempt,
            error,
            step.delay,
        )
        await journal.await_retry(
            call.key, attempt, status=EffectStatus.RETRY_WAIT, delay_seconds=step.delay, error=exc
        )
        return True
    if step.kind is Failure.UNKNOWN:
        logger.warning(
            "effect %s attempt %d: %s; the receiver may have acted", call.key, attempt, error
        )
        await journal.amark_unknown(
            call.key,
            attempt,
            error_type=type(exc).__name__,
            error_message=error_message_of(exc),
            delay_seconds=step.delay,
        )
        return True
    await journal.afail(call.key, attempt, type(exc).__name__, error_message_of(exc))
    return False
