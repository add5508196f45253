"""How an effect treats errors: retry policies, rate limits and reconcile answers; pure.

An error raised by an effect's body means one of three things, and each is handled its own
way (invariant I3):

- **nothing happened** (the request never left: a refused connection). Only errors the
  policy declares in `retry_on` count as such; they are retried in the same process with
  backoff, up to `max_attempts`.
- **the outcome is open** (the request may have gone out and been acted on: a timeout, a
  dropped connection). Errors in `unknown_on`. The attempt is journaled as `unknown`; it is
  reconciled through the effect's hook, retried with the same key only when the receiver
  honours it (`retry="idempotent"`), or the call raises `EffectOutcomeUnknown`.
- **it failed** (anything else: the receiver said no, the input was invalid). Journaled as a
  terminal failure; replays raise it again.

An error carrying a `retry_after` (ours: `RetryLater`; a 429 with Retry-After) also says
nothing happened: a short wait (up to `max_inline_wait`) is waited out in the same
process; a longer one defers the call (`EffectDeferred`), so the run can park.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from langgraph_durable.errors import InvalidInputError

__all__ = [
    "IDEMPOTENT_RECEIVER",
    "NOT_SENT_ERRORS",
    "OPEN_OUTCOME_ERRORS",
    "Reconciled",
    "RetryLater",
    "RetryPolicy",
    "retry_after_of",
]


class RetryLater(Exception):
    """Raise from an effect when the receiver says "not now" (for example HTTP 429).

    A wait of up to `RetryPolicy.max_inline_wait` (with attempts left) is waited out and
    the call tries again; a longer one parks the run: the effect raises `EffectDeferred`
    with the time to retry, and a later call after that time attempts again.
    """

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"retry after {retry_after:g}s")
        self.retry_after = retry_after


MAX_RETRY_AFTER = 30 * 24 * 3600.0
"""The longest retry-after taken, in seconds (30 days): a longer one (infinity, a date
taken for seconds) is taken as this. The journal stores the time to retry, and a
timestamp past the year 9999 could be neither stored nor read back."""


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds to wait, if the error carries a retry-after (ours or a client library's),
    at most `MAX_RETRY_AFTER`; a negative or NaN one is no retry-after."""
    value = getattr(exc, "retry_after", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return min(float(value), MAX_RETRY_AFTER)
    return None


NOT_SENT_ERRORS: tuple[type[BaseException], ...] = (ConnectionRefusedError,)
"""Errors that prove the request never reached the receiver: safe to retry blindly."""

OPEN_OUTCOME_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    asyncio.TimeoutError,  # a distinct class before Python 3.11
    concurrent.futures.TimeoutError,  # likewise
    ConnectionError,  # reset, aborted, broken pipe: the request may have been acted on
)
"""Errors after which the receiver may or may not have acted."""


@dataclass(frozen=True)
class RetryPolicy:
    """How an effect retries. Attempt counts live in the journal, so restarts keep them.

    Attributes:
        max_attempts: Attempts in all, the first included, across processes and restarts.
        initial_delay: Seconds before the second attempt.
        backoff: Factor applied to the delay after each attempt.
        max_delay: Upper bound of one delay.
        jitter: Fraction of the delay added or removed at random, so that many workers
            retrying at once spread out.
        retry_on: Errors that prove nothing happened at the receiver (the request never
            left), retried at once in the same process. Add your client's own, e.g.
            `httpx.ConnectError`. Checked before `unknown_on`.
        unknown_on: Errors that leave the outcome open (the request may have gone out):
            the attempt becomes `unknown` and is reconciled, retried only under
            `unknown_outcome="retry"`, or raises `EffectOutcomeUnknown`. Add your client's
            own, e.g. `httpx.ReadTimeout`. Any other error is a terminal failure.
        unknown_outcome: What to do with an attempt whose outcome is unknown (it timed
            out, or died without recording one) when there is no reconcile hook: "raise"
            (`EffectOutcomeUnknown`, the safe default) or "retry" with the same key, which
            is right only when the receiver honours the idempotency key.
        max_inline_wait: A rate limit asking to retry within this many seconds is waited
            out in the same process (while attempts are left); a longer one raises
            `EffectDeferred` with the time to retry.
        terminal: `error -> bool`: errors for which it says True are the receiver's final
            "no" (a 400, a refused card) and fail at once, whatever the lists above say.

    `max_attempts` bounds the attempts one call makes for errors that say nothing
    happened (then the error is raised and the key stays free to try later), and the
    attempts in all, across resumes, after outcomes that stayed open.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    backoff: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.25
    retry_on: tuple[type[BaseException], ...] = NOT_SENT_ERRORS
    unknown_on: tuple[type[BaseException], ...] = OPEN_OUTCOME_ERRORS
    unknown_outcome: Literal["raise", "retry"] = "raise"
    max_inline_wait: float = 5.0
    terminal: Callable[[BaseException], bool] | None = None

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            problems.append(f"max_attempts={self.max_attempts!r} must be an int >= 1")
        for name in ("initial_delay", "backoff", "max_delay", "max_inline_wait"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                problems.append(f"{name}={value!r} must be a number >= 0")
        if not isinstance(self.jitter, (int, float)) or not 0 <= self.jitter <= 1:
            problems.append(f"jitter={self.jitter!r} must be between 0 and 1")
        if self.unknown_outcome not in ("raise", "retry"):
            problems.append(f"unknown_outcome={self.unknown_outcome!r} must be 'raise' or 'retry'")
        for name in ("retry_on", "unknown_on"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(
                isinstance(t, type) and issubclass(t, BaseException) for t in value
            ):
                problems.append(f"{name} must be a tuple of exception classes")
        if self.terminal is not None and not callable(self.terminal):
            problems.append("terminal must be a function of the error, or None")
        if problems:
            raise InvalidInputError(f"RetryPolicy: {'; '.join(problems)}.")

    def retryable(self, exc: BaseException) -> bool:
        """Whether the error proves nothing happened, so another attempt is safe."""
        return isinstance(exc, self.retry_on)

    def leaves_outcome_open(self, exc: BaseException) -> bool:
        """Whether the receiver may have acted before the error."""
        return isinstance(exc, self.unknown_on)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        base = min(self.max_delay, self.initial_delay * self.backoff ** max(0, attempt - 1))
        spread = base * self.jitter
        return max(0.0, base + (rng or random).uniform(-spread, spread))


IDEMPOTENT_RECEIVER = RetryPolicy(unknown_outcome="retry")


@dataclass(frozen=True)
class Reconciled:
    """What a `reconcile` hook found at the receiver for a key."""

    found: bool
    result: Any = None

    @classmethod
    def completed(cls, result: Any = None) -> Reconciled:
        """The receiver did act; `result` is what the effect would have returned."""
        return cls(True, result)

    @classmethod
    def absent(cls) -> Reconciled:
        """The receiver never acted, and no earlier attempt can still reach it."""
        return cls(False)
