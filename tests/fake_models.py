"""A langchain-core chat model for tests and examples that reports token usage like a real one."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class CountingChatModel(BaseChatModel):
    """Answers with a fixed text, counts its calls and reports `usage_metadata`."""

    reply: str = "ok"
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        prompt = sum(len(str(m.content).split()) for m in messages) * 4
        output = len(self.reply.split()) * 4
        message = AIMessage(
            content=self.reply,
            usage_metadata={
                "input_tokens": prompt,
                "output_tokens": output,
                "total_tokens": prompt + output,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
