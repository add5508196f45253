"""Running one effect call against the journal (async source; `_runner.py` is generated).

The order is the product (invariants I1-I3): the journal row is committed before the
callable runs; a completed key is replayed, never called; an attempt that died without an
outcome is reconciled through the hook, retried only when the receiver honours the key,
or stops the run with `EffectOutcomeUnknown`. What to do with an existing row is decided
by the pure `decide()`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph.errors import GraphBubbleUp

from langgraph_durable import _crashpoints, _guard
from langgraph_durable.effects._ajournal import AsyncEffectJournal, owner_is_dead
from langgraph_durable.effects._call import EffectCall
from langgraph_durable.effects._heartbeat import AsyncHeartbeat
from langgraph_durable.effects._keys import current_key
from langgraph_durable.effects._policy import (
    Action,
    Reconciled,
    decide,
    retry_after_of,
)
from langgraph_durable.errors import (
    EffectDeferred,
    EffectError,
    EffectFailedError,
    EffectInProgressError,
    EffectOutcomeUnknown,
)

__all__ = ["arun_effect"]

logger = logging.getLogger("langgraph_durable.effects")

_POLL = 0.05


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _now_from(row_extra: dict[str, Any]) -> datetime:
    found = row_extra.get("db_now")
    return found if isinstance(found, datetime) else datetime.now(timezone.utc)


async def arun_effect(journal: AsyncEffectJournal, call: EffectCall) -> Any:
    """Run `call` at most once per key, by the journal's rules; returns the result."""
    result = await _arun(journal, call)
    if call.where is not None and call.guarded:
        # Done (or replayed): an interrupt() later in this task comes after an effect.
        _guard.effect_performed(call.where.task_id, call.where.node, call.name)
    return result


async def _arun(journal: AsyncEffectJournal, call: EffectCall) -> Any:
    attempt = await journal.aclaim(
        call.key, call.name, call.input_hash, call.lease_seconds, call.where
    )
    waited_since: datetime | None = None
    while attempt is None:
        row = await journal.aget(call.key)
        if row is None:  # released between our insert and our read: claim afresh
            attempt = await journal.aclaim(
                call.key, call.name, call.input_hash, call.lease_seconds, call.where
            )
            continue
        now = _now_from(row.extra)
        if row.status == "running" and owner_is_dead(row.extra.get("lease_owner")):
            # The process holding the lease is gone: its lease is as good as expired.
            row = dataclasses.replace(row, lease_expires_at=now - timedelta(seconds=1))
        decision = decide(
            row,
            name=call.name,
            input_hash=call.input_hash,
            now=now,
            policy=call.policy,
            has_reconcile=call.reconcile is not None,
        )
        if decision.action is Action.REPLAY:
            await journal.areplayed(call.key)
            return journal.load_result(row)
        if decision.action is Action.RAISE_FAILED:
            raise EffectFailedError(
                f"Effect {call.name!r} (key {call.key!r}) failed before with "
                f"{row.error_type}: {row.error_message}. The failure is journaled; replays "
                "raise it again. Resolve it or use a new key to try again.",
                key=call.key,
                error_type=row.error_type,
            )
        if decision.action is Action.RAISE_DEFERRED:
            raise EffectDeferred(
                f"Effect {call.name!r} (key {call.key!r}) is rate limited until "
                f"{decision.until}; retry the run after that time.",
                key=call.key,
                retry_at=decision.until,
            )
        if decision.action is Action.RAISE_UNKNOWN:
            await journal.amark_unknown(call.key, row.attempt)
            raise EffectOutcomeUnknown(
                f"Effect {call.name!r} (key {call.key!r}): attempt {row.attempt} started and "
                "never recorded an outcome, so the receiver may or may not have acted. Check "
                "the receiver by this key, then resolve it (`langgraph-durable resolve KEY`, "
                "or EffectJournal.resolve(key, completed=... | allow_retry=True | failed=...)) "
                "and resume the thread with invoke(None, config): do not send the input "
                "again, which would start a new run with new keys. A reconcile= hook or "
                "retry='idempotent' resolves this automatically.",
                key=call.key,
            )
        if decision.action is Action.WAIT:
            if row.status == "running":
                waited_since = waited_since or now
                if now - waited_since > timedelta(seconds=call.wait_seconds):
                    raise EffectInProgressError(
                        f"Effect {call.name!r} (key {call.key!r}) is being attempted by "
                        f"{row.extra.get('lease_owner')} (lease until {row.lease_expires_at}); "
                        f"waited {call.wait_seconds:g}s. Retry later.",
                        key=call.key,
                    )
            pause = _POLL
            if decision.until is not None:
                pause = min(max((decision.until - now).total_seconds(), 0.0), 1.0) or _POLL
            await asyncio.sleep(pause)
            continue
        if decision.action is Action.RECONCILE:
            assert call.reconcile is not None
            found = await _maybe_await(call.reconcile(call.key))
            if not isinstance(found, Reconciled):
                raise EffectError(
                    f"The reconcile hook of effect {call.name!r} returned {found!r}; return "
                    "Reconciled.completed(result) or Reconciled.absent().",
                    key=call.key,
                )
            if found.found:
                done = await journal.acomplete(
                    call.key,
                    row.attempt,
                    found.result,
                    usage=call.usage_of(found.result) if call.usage_of else None,
                    seen_statuses=("running", "unknown"),
                    resolved_by="reconcile",
                )
                if done:
                    logger.info("effect %s reconciled as completed", call.key)
                    return found.result
                continue
            logger.info("effect %s reconciled as absent; attempting again", call.key)
        # TAKE_OVER, or RECONCILE that found nothing: the next attempt, if still as seen.
        attempt = await journal.atake_over(call.key, row.attempt, row.status, call.lease_seconds)
    return await _aattempt(journal, call, attempt)


async def _aattempt(journal: AsyncEffectJournal, call: EffectCall, attempt: int) -> Any:
    while True:
        _crashpoints.reached("effect:after_claim")
        token = current_key.set(call.key)
        try:
            heartbeat = AsyncHeartbeat(journal, call.key, attempt, call.lease_seconds)
            async with heartbeat.running():
                result = await _maybe_await(call.invoke(call.key))
        except GraphBubbleUp:
            # Control flow, not a failure: an interrupt re-runs the node, which calls again.
            await journal.arelease(call.key, attempt)
            raise
        except Exception as exc:
            attempt_again = await _arecord_failure(journal, call, attempt, exc)
            if attempt_again is None:
                raise
            attempt = attempt_again
            continue
        finally:
            current_key.reset(token)
        _crashpoints.reached("effect:after_call")
        usage = call.usage_of(result) if call.usage_of else None
        if not await journal.acomplete(call.key, attempt, result, usage=usage):
            logger.warning(
                "effect %s: attempt %d finished after another worker took it over",
                call.key,
                attempt,
            )
        _crashpoints.reached("effect:after_result")
        return result


async def _arecord_failure(
    journal: AsyncEffectJournal, call: EffectCall, attempt: int, exc: Exception
) -> int | None:
    """Journal a failed attempt; the next attempt's number if it should run now."""
    retry_after = retry_after_of(exc)
    if retry_after is not None:
        retry_at = await journal.await_retry(
            call.key, attempt, status="deferred", delay_seconds=retry_after, error=exc
        )
        raise EffectDeferred(
            f"Effect {call.name!r} (key {call.key!r}) was rate limited; retry after {retry_at}.",
            key=call.key,
            retry_at=retry_at,
        ) from exc
    if call.policy.retryable(exc) and attempt < call.policy.max_attempts:
        delay = call.policy.delay(attempt)
        logger.info(
            "effect %s attempt %d failed (%s); retrying in %.2fs", call.key, attempt, exc, delay
        )
        await journal.await_retry(
            call.key, attempt, status="retry_wait", delay_seconds=delay, error=exc
        )
        await asyncio.sleep(delay)
        taken = await journal.atake_over(call.key, attempt, "retry_wait", call.lease_seconds)
        if taken is None:
            raise EffectInProgressError(
                f"Effect {call.name!r} (key {call.key!r}) was taken over while waiting to retry.",
                key=call.key,
            ) from exc
        return taken
    await journal.afail(call.key, attempt, type(exc).__name__, str(exc)[:2000])
    return None
