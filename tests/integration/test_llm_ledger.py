"""Journaled model calls: a resumed node does not pay again, and the ledger says so."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fake_models import CountingChatModel
from langchain_core.messages import HumanMessage
from langchain_core.prompts import ChatPromptTemplate
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_durable import (
    ConfigurationError,
    DurablePostgresSaver,
    EffectDeferred,
    EffectOutcomeUnknown,
    InvalidInputError,
    JournaledChatModel,
    ModelCostPolicy,
    token_ledger,
)


class State(TypedDict, total=False):
    draft: str
    approved: Any


def test_resumed_node_replays_the_model_call_and_counts_saved_tokens(db_dsn: str) -> None:
    model = CountingChatModel(reply="Dear customer, your refund is under review.")
    llm = JournaledChatModel(model)

    def draft(state: State) -> dict[str, Any]:
        reply = llm.invoke([HumanMessage("Write a short note about refund 8890 for Ana.")])
        approved = interrupt({"draft": reply.content})
        return {"draft": str(reply.content), "approved": approved}

    builder = StateGraph(State)
    builder.add_node("draft", draft)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", END)
    thread = f"llm-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        graph.invoke({}, config)
        result = graph.invoke(Command(resume=True), config)
        ledger = token_ledger(saver, thread)
    assert result["draft"] == "Dear customer, your refund is under review."
    assert model.calls == 1
    assert ledger["calls"] == 1
    assert ledger["replays"] == 1
    assert ledger["total_tokens"] > 0
    assert ledger["saved_total_tokens"] == ledger["total_tokens"]


class FlakyModel(CountingChatModel):
    """Fails its first `failures` calls the way providers do, after billing them."""

    failures: int = 1

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        answer = super()._generate(messages, stop, run_manager, **kw)
        if self.calls <= self.failures:
            raise RuntimeError("502 from the provider, after billing the call")
        return answer


def one_model_node(
    llm: JournaledChatModel, prompt: Any, *, ask: bool = False
) -> StateGraph[Any, Any, Any, Any]:
    """One node that calls the model (and then, with `ask`, waits for an answer)."""

    def draft(state: State) -> dict[str, Any]:
        text = str(llm.invoke(prompt).content)
        return {"draft": text, "approved": interrupt(text) if ask else None}

    builder = StateGraph(State)
    builder.add_node("draft", draft)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", END)
    return builder


def test_a_failed_model_call_is_asked_again_within_the_cost_policy(db_dsn: str) -> None:
    model = FlakyModel(reply="ok", failures=1)
    llm = JournaledChatModel(model, cost=ModelCostPolicy(retry_delay=0.01))
    config: Any = {"configurable": {"thread_id": f"llm-{uuid.uuid4()}"}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = one_model_node(llm, [HumanMessage("hi")]).compile(checkpointer=saver)
        assert graph.invoke({}, config)["draft"] == "ok"
    assert model.calls == 2


def test_no_reasks_stops_at_the_first_lost_answer(db_dsn: str) -> None:
    model = FlakyModel(reply="ok", failures=1)
    llm = JournaledChatModel(model, cost=ModelCostPolicy(max_reasks=0))
    config: Any = {"configurable": {"thread_id": f"llm-{uuid.uuid4()}"}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = one_model_node(llm, "hi").compile(checkpointer=saver)
        with pytest.raises(EffectOutcomeUnknown, match="all 1 attempts were used"):
            graph.invoke({}, config)
    assert model.calls == 1


@pytest.mark.parametrize(
    "prompt",
    [
        "Write a note.",
        [("user", "Write a note.")],
        [{"role": "user", "content": "Write a note."}],
        ChatPromptTemplate.from_messages([("user", "Write a {what}.")]).invoke({"what": "note"}),
    ],
    ids=["string", "tuples", "dicts", "prompt-value"],
)
def test_every_chat_model_input_is_accepted_and_replayed(db_dsn: str, prompt: Any) -> None:
    model = CountingChatModel(reply="noted")
    llm = JournaledChatModel(model)
    thread = f"llm-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = one_model_node(llm, prompt, ask=True).compile(checkpointer=saver)
        graph.invoke({}, config)
        # The resume runs the node again from its first line: the call is replayed.
        assert graph.invoke(Command(resume=True), config)["draft"] == "noted"
        ledger = token_ledger(saver, thread)
    assert (ledger["calls"], ledger["replays"]) == (1, 1)
    assert model.calls == 1


def test_a_model_input_no_chat_model_takes_is_a_named_error(db_dsn: str) -> None:
    llm = JournaledChatModel(CountingChatModel())
    with pytest.raises(InvalidInputError, match="string, a list of messages"):
        llm.invoke([42])  # type: ignore[list-item]


def test_the_ledger_helpers_are_exported_and_refuse_other_savers() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    import langgraph_durable

    assert langgraph_durable.JournaledChatModel is JournaledChatModel
    assert langgraph_durable.token_ledger is token_ledger
    with pytest.raises(ConfigurationError, match="needs a langgraph-durable saver"):
        token_ledger(InMemorySaver(), "t")  # type: ignore[arg-type]


class ProviderError(Exception):
    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class RefusingModel(CountingChatModel):
    """Answers with the provider's final "no", after counting the call."""

    status: int = 400

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.calls += 1
        raise ProviderError("context_length_exceeded", self.status)


@pytest.mark.parametrize(("status", "calls"), [(400, 1), (401, 1), (429, 3), (503, 3)])
def test_a_providers_final_no_is_not_asked_again(db_dsn: str, status: int, calls: int) -> None:
    model = RefusingModel(status=status)
    llm = JournaledChatModel(model, cost=ModelCostPolicy(retry_delay=0.001))
    config: Any = {"configurable": {"thread_id": f"llm-{uuid.uuid4()}"}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = one_model_node(llm, "hi").compile(checkpointer=saver)
        with pytest.raises((ProviderError, EffectOutcomeUnknown, EffectDeferred)) as raised:
            graph.invoke({}, config)
    assert model.calls == calls
    if status in (400, 401):
        assert isinstance(raised.value, ProviderError)  # the caller's own error, at once
    if status == 503:
        assert "answer is lost and may have been paid for" in str(raised.value)
