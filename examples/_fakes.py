"""Fake chat models for the examples and notebooks: no network, but usage like a real one.

A copy of `tests/fake_models.py` (examples do not import the tests), plus `ScriptedChatModel`,
which answers by keyword so that each step of a workflow gets a fitting reply.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["CountingChatModel", "ScriptedChatModel"]


class CountingChatModel(BaseChatModel):
    """Answers with a fixed text, counts its calls and reports `usage_metadata`."""

    reply: str = "ok"
    calls: int = 0
    model_name: str = "counting-fake"

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    def _answer(self, messages: list[BaseMessage]) -> str:
        return self.reply

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        reply = self._answer(messages)
        prompt = sum(len(str(m.content).split()) for m in messages) * 4
        output = len(reply.split()) * 4
        message = AIMessage(
            content=reply,
            usage_metadata={
                "input_tokens": prompt,
                "output_tokens": output,
                "total_tokens": prompt + output,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedChatModel(CountingChatModel):
    """Replies with the first answer whose keyword appears in the last message."""

    answers: dict[str, str] = {}
    model_name: str = "scripted-fake"

    def _answer(self, messages: list[BaseMessage]) -> str:
        last = str(messages[-1].content).lower() if messages else ""
        for keyword, answer in self.answers.items():
            if keyword.lower() in last:
                return answer
        return self.reply
