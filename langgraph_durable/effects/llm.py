"""Model calls as effects: a crashed run that resumes does not pay for the same tokens again.

    llm = JournaledChatModel(ChatOpenAI(model="gpt-4o-mini"))

    def draft(state):
        reply = llm.invoke(state["messages"])      # journaled: replays after a crash
        return {"messages": [reply]}

    token_ledger(saver, thread_id)  # {"total_tokens": ..., "saved_total_tokens": ..., ...}

Each call is an `@effect` named `llm:<model>`: the response (an `AIMessage`) is stored with
its `usage_metadata`, and every replay adds the call's tokens to what the thread saved.

A model call acts on nothing outside: losing one (the worker died mid-call, the provider
timed out or failed) costs only tokens. So a lost call is asked again instead of stopping
the run, within an explicit `ModelCostPolicy`: at most `max_reasks` times, and only while
the thread's model calls stay under `max_thread_tokens`. Past either limit the call
raises `EffectOutcomeUnknown`; `langgraph-durable resolve KEY --allow-retry` lets it ask
again.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig

from langgraph_durable.checkpoint import AsyncDurablePostgresSaver, DurablePostgresSaver
from langgraph_durable.effects._ajournal import AsyncEffectJournal
from langgraph_durable.effects._effect import EffectSpec, journal_of, journaled
from langgraph_durable.effects._journal import EffectJournal
from langgraph_durable.effects._policy import RetryPolicy
from langgraph_durable.effects._protocol import JournalRow
from langgraph_durable.errors import ConfigurationError, InvalidInputError

__all__ = [
    "JournaledChatModel",
    "ModelCostPolicy",
    "atoken_ledger",
    "provider_refused",
    "token_ledger",
    "usage_of",
]

# The LangChain config of the call under way: passed to the model but kept out of the
# effect's input hash (callbacks, tags and run names do not change the answer).
_call_config: contextvars.ContextVar[RunnableConfig | None] = contextvars.ContextVar(
    "langgraph_durable_llm_config", default=None
)


@dataclass(frozen=True)
class ModelCostPolicy:
    """What one model call may cost again after its answer was lost.

    Attributes:
        max_reasks: How many times a call is asked again after attempts whose answers
            were lost (a crash mid-call, a timeout, a provider error), counted in the
            journal across crashes and resumes. 0 stops at the first loss.
        max_thread_tokens: Ask again only while the thread's journaled model calls have
            used fewer tokens than this; None for no budget. Tokens of lost attempts are
            unknown and not counted.
        retry_delay: Seconds before the first re-ask (doubling after each).
    """

    max_reasks: int = 2
    max_thread_tokens: int | None = None
    retry_delay: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.max_reasks, int) or self.max_reasks < 0:
            raise InvalidInputError(f"max_reasks={self.max_reasks!r}: use an int >= 0.")
        budget = self.max_thread_tokens
        if budget is not None and (not isinstance(budget, int) or budget <= 0):
            raise InvalidInputError(f"max_thread_tokens={budget!r}: use a positive int or None.")

    def retry_policy(self) -> RetryPolicy:
        """A lost answer leaves only a cost behind: ask again, within limits. A provider's
        final "no" (a 400, bad input) is not asked again."""
        return RetryPolicy(
            max_attempts=1 + self.max_reasks,
            initial_delay=self.retry_delay,
            unknown_on=(Exception,),
            unknown_outcome="retry",
            terminal=provider_refused,
        )

    def over_budget(self, used: int) -> str | None:
        """Why a re-ask may not happen, or None when it may."""
        if self.max_thread_tokens is not None and used >= self.max_thread_tokens:
            return (
                f"the thread's model calls used {used:,} tokens of a budget of "
                f"{self.max_thread_tokens:,} (ModelCostPolicy.max_thread_tokens)"
            )
        return None


def provider_refused(exc: BaseException) -> bool:
    """Whether a model call's error is the provider's final answer, not a lost one.

    A client error (HTTP 4xx other than 408 timeout, 409 conflict and 429 rate limit) as
    the provider SDKs report it (`status_code`, or `response.status_code`), or bad input
    rejected before any request was sent (`ValueError`, `TypeError`).
    """
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and 400 <= status < 500:
        return status not in (408, 409, 429)
    return isinstance(exc, (ValueError, TypeError))


def usage_of(result: Any) -> dict[str, Any] | None:
    """The `usage_metadata` of a chat model response, if it reports one."""
    usage = getattr(result, "usage_metadata", None)
    return dict(usage) if usage else None


def _model_name(model: BaseChatModel) -> str:
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class JournaledChatModel:
    """A chat model whose `invoke`/`ainvoke` calls are journaled effects.

    Args:
        model: Any langchain-core chat model.
        name: The effect name; defaults to `llm:<model name>`.
        cost: How often, and within which token budget, a call whose answer was lost is
            asked again (default: twice, no budget).
        retry: A full `RetryPolicy` instead of the one `cost` implies.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        name: str | None = None,
        cost: ModelCostPolicy | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.name = name or f"llm:{_model_name(model)}"
        self.cost = cost or ModelCostPolicy()
        policy = retry or self.cost.retry_policy()
        budget = self.cost

        def within_budget(journal: EffectJournal, row: JournalRow) -> str | None:
            thread = row.extra.get("thread_id")
            if budget.max_thread_tokens is None or thread is None:
                return None
            return budget.over_budget(journal.token_ledger(thread)["total_tokens"])

        async def awithin_budget(journal: AsyncEffectJournal, row: JournalRow) -> str | None:
            thread = row.extra.get("thread_id")
            if budget.max_thread_tokens is None or thread is None:
                return None
            return budget.over_budget((await journal.atoken_ledger(thread))["total_tokens"])

        def call(messages: Sequence[BaseMessage] | str, options: dict[str, Any]) -> BaseMessage:
            return model.invoke(messages, _call_config.get(), **options)

        async def acall(
            messages: Sequence[BaseMessage] | str, options: dict[str, Any]
        ) -> BaseMessage:
            return await model.ainvoke(messages, _call_config.get(), **options)

        def spec(fn: Any, may_reattempt: Any) -> EffectSpec:
            return EffectSpec(
                fn,
                name=self.name,
                key=None,
                retry=policy,
                reconcile=None,
                lease_ttl=300.0,
                wait_timeout=30.0,
                journal=None,
                usage=usage_of,
                interrupt_guard=False,  # asking again costs tokens, never an outside effect
                may_reattempt=may_reattempt,
                cost_only=True,
            )

        self._call = journaled(call, spec(call, within_budget))
        self._acall = journaled(acall, spec(acall, awithin_budget))

    def invoke(
        self,
        messages: LanguageModelInput,
        config: RunnableConfig | None = None,
        **options: Any,
    ) -> BaseMessage:
        """Call the model once per key; a replay returns the stored response.

        Takes every input a chat model takes: a string, a list of messages or of message
        likes (`("user", "hi")`, dicts), or a prompt value. `config` (callbacks, tags, run
        name) goes to the model but not into the input hash; `options` (such as `stop`)
        change the answer and are part of it.
        """
        token = _call_config.set(config)
        try:
            return self._call(_as_messages(messages), options)
        finally:
            _call_config.reset(token)

    async def ainvoke(
        self,
        messages: LanguageModelInput,
        config: RunnableConfig | None = None,
        **options: Any,
    ) -> BaseMessage:
        """Async `invoke`."""
        token = _call_config.set(config)
        try:
            return await self._acall(_as_messages(messages), options)
        finally:
            _call_config.reset(token)


def _as_messages(messages: LanguageModelInput) -> Sequence[BaseMessage] | str:
    """The model input as messages (a plain string stays one), for the input hash."""
    if isinstance(messages, str):
        return messages
    if isinstance(messages, PromptValue):
        return messages.to_messages()
    try:
        return convert_to_messages(messages)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise InvalidInputError(
            f"JournaledChatModel cannot use {type(messages).__name__} as model input ({exc}). "
            "Pass what a chat model takes: a string, a list of messages or message likes "
            '(("user", "hi"), {"role": "user", "content": "hi"}), or a prompt value.'
        ) from exc


def _journal_for(saver: Any) -> EffectJournal | AsyncEffectJournal:
    if isinstance(saver, (EffectJournal, AsyncEffectJournal)):
        return saver
    journal = journal_of(saver)
    if journal is None:
        raise ConfigurationError(
            f"token_ledger needs a langgraph-durable saver or an effect journal, not "
            f"{type(saver).__name__}."
        )
    return journal


def token_ledger(saver: DurablePostgresSaver | EffectJournal, thread_id: str) -> dict[str, int]:
    """Tokens a thread paid for in journaled model calls, and tokens saved by replays."""
    journal = _journal_for(saver)
    if not isinstance(journal, EffectJournal):
        raise ConfigurationError("token_ledger is sync: use `await atoken_ledger(...)` here.")
    return journal.token_ledger(thread_id)


async def atoken_ledger(
    saver: AsyncDurablePostgresSaver | AsyncEffectJournal, thread_id: str
) -> dict[str, int]:
    """Async `token_ledger`."""
    journal = _journal_for(saver)
    if not isinstance(journal, AsyncEffectJournal):
        raise ConfigurationError("atoken_ledger is async: use `token_ledger(...)` here.")
    return await journal.atoken_ledger(thread_id)
