"""`@effect`: make a side effect idempotent across re-runs, retries and crashes.

    @effect
    def create_deal(customer: str, amount: int, idempotency_key: str) -> dict: ...

    @effect(key=lambda order: f"refund:{order.id}", retry="idempotent")
    async def refund(order: Order) -> Receipt: ...

Inside a graph compiled with a langgraph-durable saver the journal is found through the
graph's checkpointer; elsewhere pass `journal=` or call `set_default_journal()`. The
decorated callable may be sync or async and can be called from nodes, tools and `@task`
functions; a whole node can be decorated too (its state update is then the journaled
result).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal, ParamSpec, TypeVar, cast, overload

from langgraph.config import get_config

from langgraph_durable._db import source_of
from langgraph_durable._ids import is_text
from langgraph_durable.checkpoint import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.effects._ajournal import AsyncEffectJournal
from langgraph_durable.effects._arunner import arun_effect
from langgraph_durable.effects._call import EffectCall
from langgraph_durable.effects._journal import EffectJournal
from langgraph_durable.effects._keys import (
    check_key,
    default_effect_name,
    default_key,
    input_hash,
    next_ordinal,
    task_context,
)
from langgraph_durable.effects._policy import IDEMPOTENT_RECEIVER, RetryPolicy
from langgraph_durable.effects._runner import run_effect
from langgraph_durable.errors import (
    ConfigurationError,
    InvalidInputError,
    JournalNotFoundError,
    WrongSaverClassError,
)

__all__ = [
    "EffectSpec",
    "ajournal_here",
    "effect",
    "journal_here",
    "journal_of",
    "journaled",
    "set_default_journal",
]

P = ParamSpec("P")
R = TypeVar("R")

KEY_PARAMETER = "idempotency_key"

AnyJournal = EffectJournal | AsyncEffectJournal

_default_journal: AnyJournal | None = None


def set_default_journal(journal: AnyJournal | None) -> None:
    """The journal for effects called outside a graph with a langgraph-durable saver."""
    global _default_journal
    _default_journal = journal


_journals: weakref.WeakKeyDictionary[Any, EffectJournal | AsyncEffectJournal] = (
    weakref.WeakKeyDictionary()
)


def journal_of(saver: Any) -> EffectJournal | AsyncEffectJournal | None:
    """The journal in a langgraph-durable saver's database (made once per saver), or None.

    It borrows the saver's connections and uses its serializer.
    """
    if not isinstance(saver, (DurablePostgresSaver, AsyncDurablePostgresSaver)):
        return None
    journal = _journals.get(saver)
    if journal is None:
        source = source_of(saver)
        if isinstance(saver, AsyncDurablePostgresSaver):
            journal = AsyncEffectJournal(source, serde=saver.serde)
        else:
            journal = EffectJournal(source, serde=saver.serde)
        _journals[saver] = journal
    return journal


def _saver_here() -> Any:
    """The checkpointer of the graph task this runs in, as `EffectSpec.prepare` finds it."""
    try:
        config = get_config()
    except RuntimeError:
        return None
    where = task_context(config)
    return where.checkpointer if where else None


def journal_here() -> EffectJournal:
    """The journal a sync `@effect` without `journal=` uses where this is called: its
    graph's saver's (on an async saver's loop for a sync node), else the default one."""
    saver = _saver_here()
    return _sync_journal(_find_journal(None, saver), saver)


def ajournal_here() -> AsyncEffectJournal:
    """The journal an async `@effect` without `journal=` uses where this is called."""
    return _async_journal(_find_journal(None, _saver_here()))


class _LoopBridgedJournal:
    """A sync view of an async journal, for sync effects in graphs run with `ainvoke`.

    LangGraph runs sync nodes in worker threads; each journal call is sent to the saver's
    event loop, as the async saver's own sync methods do.
    """

    def __init__(self, journal: AsyncEffectJournal, loop: asyncio.AbstractEventLoop) -> None:
        self._journal = journal
        self._loop = loop
        self.serde = journal.serde
        self.owner = journal.owner
        self.load_result = journal.load_result
        self.dump_result = journal.dump_result
        self.owner_of = journal.owner_of

    def __getattr__(self, name: str) -> Callable[..., Any]:
        target = getattr(self._journal, "await_retry" if name == "wait_retry" else f"a{name}")

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                on_loop = asyncio.get_running_loop() is self._loop
            except RuntimeError:
                on_loop = False
            if on_loop:
                raise WrongSaverClassError(
                    "A sync @effect was called on the event loop of AsyncDurablePostgresSaver; "
                    "make the effect `async def` or call it from a sync node."
                )
            future: Future[Any] = asyncio.run_coroutine_threadsafe(
                target(*args, **kwargs), self._loop
            )
            return future.result()

        return call


class _ThreadedJournal:
    """An async view of a sync journal: each call runs in a worker thread."""

    def __init__(self, journal: EffectJournal) -> None:
        self._journal = journal
        self.serde = journal.serde
        self.owner = journal.owner
        self.load_result = journal.load_result
        self.dump_result = journal.dump_result
        self.owner_of = journal.owner_of

    async def asleep(self, seconds: float) -> None:
        # The journal's own wait: a real sleep, or a manual clock that moves at once.
        await asyncio.to_thread(self._journal.sleep, seconds)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        plain = name[1:] if name.startswith("a") else name
        target = getattr(self._journal, "wait_retry" if name == "await_retry" else plain)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(target, *args, **kwargs)

        return call


def _find_journal(explicit: Any, saver: Any) -> Any:
    journal = explicit or journal_of(saver) or _default_journal
    if journal is None:
        raise JournalNotFoundError()
    return journal


def _sync_journal(journal: Any, saver: Any) -> EffectJournal:
    if isinstance(journal, EffectJournal):
        return journal
    if isinstance(journal, AsyncEffectJournal):
        loop = (
            getattr(saver, "loop", None) if isinstance(saver, AsyncDurablePostgresSaver) else None
        )
        if loop is None:
            raise ConfigurationError(
                "A sync @effect needs a sync journal: pass journal=EffectJournal(pool) or make "
                "the effect `async def`."
            )
        return cast(EffectJournal, _LoopBridgedJournal(journal, loop))
    raise ConfigurationError(f"journal must be an EffectJournal, got {type(journal).__name__}.")


def _async_journal(journal: Any) -> AsyncEffectJournal:
    if isinstance(journal, AsyncEffectJournal):
        return journal
    if isinstance(journal, EffectJournal):
        return cast(AsyncEffectJournal, _ThreadedJournal(journal))
    raise ConfigurationError(
        f"journal must be an AsyncEffectJournal, got {type(journal).__name__}."
    )


class EffectSpec:
    """The options of one decorated effect, and how to prepare each of its calls."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        key: str | Callable[..., str] | None,
        retry: RetryPolicy | Literal["idempotent"] | None,
        reconcile: Callable[..., Any] | None,
        lease_ttl: float,
        wait_timeout: float,
        journal: AnyJournal | None,
        usage: Callable[[Any], dict[str, Any] | None] | None,
        interrupt_guard: bool = True,
        may_reattempt: Callable[[Any, Any], Any] | None = None,
        cost_only: bool = False,
        event: str | None = None,
    ) -> None:
        self.fn = fn
        if event is not None and (
            not isinstance(event, str) or not event.strip() or not is_text(event)
        ):
            raise InvalidInputError(
                f"effect event={event!r}: pass a non-empty event type without NUL or lone "
                "surrogates."
            )
        self.event = event
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InvalidInputError(f"effect name={name!r}: pass a non-empty string.")
        self.name = name or default_effect_name(fn)
        check_key(self.name, self.name, what="effect name")
        if isinstance(key, str):
            check_key(self.name, key)
        self.key = key
        self.policy = IDEMPOTENT_RECEIVER if retry == "idempotent" else (retry or RetryPolicy())
        self.reconcile = reconcile
        self.lease_ttl = lease_ttl
        self.wait_timeout = wait_timeout
        self.journal = journal
        self.usage = usage
        self.interrupt_guard = interrupt_guard
        self.may_reattempt = may_reattempt
        self.cost_only = cost_only
        self.signature = inspect.signature(fn)
        self.wants_key = KEY_PARAMETER in self.signature.parameters
        self.positional_names = _positional_names(self.signature)
        self.required_names = _required_names(self.signature)
        if lease_ttl <= 0 or wait_timeout < 0:
            raise InvalidInputError("lease_ttl must be positive and wait_timeout not negative.")

    def prepare(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        call_site: tuple[str, int] | None = None,
    ) -> tuple[EffectCall, Any]:
        """The call to run and the journal to run it with (sync or async, unresolved)."""
        try:
            config = get_config()
        except RuntimeError:
            config = None
        where = task_context(config)
        saver = where.checkpointer if where else None
        journal = _find_journal(self.journal, saver)
        digest = input_hash(journal.serde, self.name, self.arguments(args, kwargs))
        key = self._key(args, kwargs, where)

        def invoke(idempotency_key: str) -> Any:
            if self.wants_key:
                return self.fn(*args, **{**kwargs, KEY_PARAMETER: idempotency_key})
            return self.fn(*args, **kwargs)

        reconcile = None
        if self.reconcile is not None:
            hook = self.reconcile

            def reconcile(idempotency_key: str) -> Any:
                return hook(idempotency_key, *args, **kwargs)

        call = EffectCall(
            name=self.name,
            key=key,
            input_hash=digest,
            policy=self.policy,
            lease_seconds=self.lease_ttl,
            wait_seconds=self.wait_timeout,
            where=where,
            invoke=invoke,
            reconcile=reconcile,
            usage_of=self.usage,
            guarded=self.interrupt_guard,
            may_reattempt=self.may_reattempt,
            call_site=call_site,
            cost_only=self.cost_only,
            completion_event=self.event,
            default_key=self.key is None,
        )
        return call, (journal, saver)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, defaults filled in, without the key parameter:
        what the input hash covers."""
        names = self.positional_names
        if names is not None and not kwargs and len(args) == len(names):
            # Every parameter given by position (the usual call): what binding gives, at
            # a tenth of its cost.
            arguments = dict(zip(names, args, strict=True))
        else:
            try:
                # Partial: the key parameter may be left for the runner to give.
                bound = self.signature.bind_partial(*args, **kwargs)
            except TypeError as exc:
                raise InvalidInputError(f"effect {self.name!r}: {exc}") from exc
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            missing = [n for n in self.required_names if n not in arguments]
            if missing:
                # Refused before the key is claimed: the body's TypeError would be
                # journaled as the effect's failure, and the key kept failed for good.
                raise InvalidInputError(
                    f"effect {self.name!r}: missing required argument(s) "
                    f"{', '.join(map(repr, missing))}; nothing was claimed or called."
                )
        arguments.pop(KEY_PARAMETER, None)
        return arguments

    def _key(self, args: tuple[Any, ...], kwargs: dict[str, Any], where: Any) -> str:
        if isinstance(self.key, str):
            return self.key
        if self.key is not None:
            key = self.key(*args, **{k: v for k, v in kwargs.items() if k != KEY_PARAMETER})
            return check_key(self.name, key, what="key function's result")
        if where is None:
            raise InvalidInputError(
                f"effect {self.name!r} was called outside a LangGraph node or task, where no "
                "default key can be derived: pass key= (a string or a function of the "
                "arguments)."
            )
        return default_key(where, self.name, next_ordinal(where, self.name))


def _required_names(signature: inspect.Signature) -> tuple[str, ...]:
    """The parameters a call must give (no default, not `*args`/`**kwargs`), but the key
    parameter, which the runner gives when the call does not."""
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return tuple(
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind not in variadic
        and p.name != KEY_PARAMETER
    )


def _positional_names(signature: inspect.Signature) -> tuple[str, ...] | None:
    """The parameters' names when every one can be given by position (no `*args`,
    `**kwargs` or keyword-only parameter); None otherwise."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if all(p.kind in kinds for p in signature.parameters.values()):
        return tuple(signature.parameters)
    return None


def journaled(fn: Callable[P, R], spec: EffectSpec) -> Callable[P, R]:
    """`fn` run through the journal as `spec` says: the wrapper `@effect` returns."""
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    if inspect.iscoroutinefunction(fn) or (
        not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)
    ):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            call, (found, _saver) = spec.prepare(args, kwargs, _caller())
            return await arun_effect(_async_journal(found), call)

        run_async.__effect__ = spec  # type: ignore[attr-defined]
        return cast(Callable[P, R], run_async)

    if spec.reconcile is not None and inspect.iscoroutinefunction(spec.reconcile):
        raise InvalidInputError(
            f"effect {spec.name!r} is sync but its reconcile hook is async; make both "
            "sync or both async."
        )

    @functools.wraps(fn)
    def run_sync(*args: Any, **kwargs: Any) -> Any:
        call, (found, saver) = spec.prepare(args, kwargs, _caller())
        return run_effect(_sync_journal(found, saver), call)

    run_sync.__effect__ = spec  # type: ignore[attr-defined]
    return cast(Callable[P, R], run_sync)


def _caller() -> tuple[str, int] | None:
    """(file, line) of the code that called the effect: two frames up from here.

    Kept with the call so that the interrupt guard can point at the user's node rather than
    at this package. One frame lookup; no stack walk on the hot path.
    """
    try:
        frame = sys._getframe(2)
    except ValueError:  # pragma: no cover - called from the top of a stack
        return None
    return frame.f_code.co_filename, frame.f_lineno


@overload
def effect(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def effect(
    *,
    name: str | None = None,
    key: str | Callable[..., str] | None = None,
    retry: RetryPolicy | Literal["idempotent"] | None = None,
    reconcile: Callable[..., Any] | None = None,
    lease_ttl: float = 300.0,
    wait_timeout: float = 30.0,
    journal: AnyJournal | None = None,
    usage: Callable[[Any], dict[str, Any] | None] | None = None,
    interrupt_guard: bool = True,
    event: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def effect(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    key: str | Callable[..., str] | None = None,
    retry: RetryPolicy | Literal["idempotent"] | None = None,
    reconcile: Callable[..., Any] | None = None,
    lease_ttl: float = 300.0,
    wait_timeout: float = 30.0,
    journal: AnyJournal | None = None,
    usage: Callable[[Any], dict[str, Any] | None] | None = None,
    interrupt_guard: bool = True,
    event: str | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Journal a side effect so that it runs at most once per key.

    Before each attempt a row (key, name, input hash, attempt, lease) is committed; a
    completed key returns its stored result without calling; an attempt that died without
    an outcome is reconciled, retried (only with `retry="idempotent"`) or raises
    `EffectOutcomeUnknown`.

    Args:
        fn: The callable (sync or async). It receives the key as `idempotency_key=` when it
            declares that parameter; `current_effect_key()` gives it anywhere inside.
        name: Stored with each row, part of default keys and checked on replay. Defaults
            to `<module>.<qualname>` with only the module's own name (`payments.charge` for
            `charge` in `billing/payments.py`), so the name is the same whether the file
            runs as a script or is imported. Renaming an effect (or moving it to another
            module) between a crash and its resume changes its keys: pass the old name
            with `name=` until such runs have finished.
        key: A business key (string or function of the arguments) to deduplicate across
            threads; by default a key derived from where the call happens in the graph.
        retry: A `RetryPolicy`, or "idempotent" when the receiver honours the key (an
            unknown outcome is then retried instead of raising).
        reconcile: `hook(key, *args, **kwargs) -> Reconciled` that asks the receiver whether
            an attempt with this key happened (sync, or async for async effects).
        lease_ttl: Seconds an attempt owns the key before it counts as dead (a dead process
            on the same host is detected at once).
        wait_timeout: Seconds to wait for another worker's attempt before raising
            `EffectInProgressError`.
        journal: The journal to use outside a langgraph-durable graph.
        usage: Extracts token usage from a result, for the token ledger.
        interrupt_guard: Report this effect when its node then calls `interrupt()` (see
            `set_interrupt_guard`); off for calls that are safe to replay, like model calls.
        event: An outbox event type to store with the completion, in the journal's own
            transaction (one per key; payload: the key, the effect name and the result if
            it is JSON). Needs the Postgres journal; published by an `OutboxRelay`.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        spec = EffectSpec(
            fn,
            name=name,
            key=key,
            retry=retry,
            reconcile=reconcile,
            lease_ttl=lease_ttl,
            wait_timeout=wait_timeout,
            journal=journal,
            usage=usage,
            interrupt_guard=interrupt_guard,
            event=event,
        )
        return journaled(fn, spec)

    if fn is not None:
        return decorate(fn)
    return decorate
