"""Model calls as effects: a crashed run that resumes does not pay for the same tokens again.

    llm = JournaledChatModel(ChatOpenAI(model="gpt-4o-mini"))

    def draft(state):
        reply = llm.invoke(state["messages"])      # journaled: replays after a crash
        return {"messages": [reply]}

    token_ledger(saver, thread_id)  # {"total_tokens": ..., "saved_total_tokens": ..., ...}

Each call is an `@effect` named `llm:<model>`: the response (an `AIMessage`) is stored with
its `usage_metadata`, and every replay adds the call's tokens to what the thread saved.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_durable.checkpoint.aio import AsyncDurablePostgresSaver
from langgraph_durable.checkpoint.sync import DurablePostgresSaver
from langgraph_durable.effects._effect import _journal_of_saver, effect
from langgraph_durable.effects._journal import EffectJournal
from langgraph_durable.effects._policy import RetryPolicy
from langgraph_durable.errors import ConfigurationError

__all__ = ["JournaledChatModel", "atoken_ledger", "token_ledger", "usage_of"]

# The LangChain config of the call under way: passed to the model but kept out of the
# effect's input hash (callbacks, tags and run names do not change the answer).
_call_config: contextvars.ContextVar[RunnableConfig | None] = contextvars.ContextVar(
    "langgraph_durable_llm_config", default=None
)


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
        retry: Retry policy for provider errors (rate limits defer the run).
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.name = name or f"llm:{_model_name(model)}"

        @effect(name=self.name, retry=retry, usage=usage_of, interrupt_guard=False)
        def call(messages: Sequence[BaseMessage] | str, options: dict[str, Any]) -> BaseMessage:
            return model.invoke(messages, _call_config.get(), **options)

        @effect(name=self.name, retry=retry, usage=usage_of, interrupt_guard=False)
        async def acall(
            messages: Sequence[BaseMessage] | str, options: dict[str, Any]
        ) -> BaseMessage:
            return await model.ainvoke(messages, _call_config.get(), **options)

        self._call = call
        self._acall = acall

    def invoke(
        self,
        messages: LanguageModelInput,
        config: RunnableConfig | None = None,
        **options: Any,
    ) -> BaseMessage:
        """Call the model once per key; a replay returns the stored response.

        `config` (callbacks, tags, run name) goes to the model but not into the input hash;
        `options` (such as `stop`) change the answer and are part of it.
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
        token = _call_config.set(config)
        try:
            return await self._acall(_as_messages(messages), options)
        finally:
            _call_config.reset(token)


def _as_messages(messages: LanguageModelInput) -> Sequence[BaseMessage] | str:
    if isinstance(messages, str):
        return messages
    if isinstance(messages, Sequence):
        found = [m for m in messages if isinstance(m, BaseMessage)]
        if len(found) == len(messages):
            return found
    raise ConfigurationError(
        "JournaledChatModel takes a string or a list of messages (BaseMessage objects)."
    )


def token_ledger(saver: DurablePostgresSaver, thread_id: str) -> dict[str, int]:
    """Tokens a thread paid for in journaled model calls, and tokens saved by replays."""
    journal = _journal_of_saver(saver)
    assert isinstance(journal, EffectJournal)
    return journal.token_ledger(thread_id)


async def atoken_ledger(saver: AsyncDurablePostgresSaver, thread_id: str) -> dict[str, int]:
    """Async `token_ledger`."""
    journal = _journal_of_saver(saver)
    assert journal is not None
    assert not isinstance(journal, EffectJournal)
    return await journal.atoken_ledger(thread_id)
