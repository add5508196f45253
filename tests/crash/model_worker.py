"""A worker process for model-call crash tests: one node asks a model, then the run ends.

    python tests/crash/model_worker.py DSN THREAD [--resume | --new-turn] [--kill-in-model]
        [--max-reasks N] [--max-thread-tokens N]

The model is a fake chat model that records every call it receives in `model_calls` (on its
own autocommit connection: the provider's bill survives the worker). `--kill-in-model`
SIGKILLs the process inside the call, after the provider billed it and before an answer
came back: the answer is lost. The run uses durability="sync", so the input is
checkpointed and a new process resumes with `invoke(None)`.

Exit codes: 0 finished (the answer is printed), 4 EffectOutcomeUnknown.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

import psycopg
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    EffectOutcomeUnknown,
    JournaledChatModel,
    ModelCostPolicy,
)

EXIT_OUTCOME_UNKNOWN = 4


class BilledModel(BaseChatModel):
    """Bills each call in `model_calls`, then answers (or dies, with `kill`)."""

    dsn: str
    thread: str
    kill: bool = False

    @property
    def _llm_type(self) -> str:
        return "billed-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO model_calls (thread_id, pid) VALUES (%s, %s)",
                (self.thread, os.getpid()),
            )
        if self.kill:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        message = AIMessage(
            "Refund 8890 is under review.",
            usage_metadata={"input_tokens": 40, "output_tokens": 10, "total_tokens": 50},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


class State(TypedDict, total=False):
    question: str
    answer: str


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("thread")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--new-turn", action="store_true", help="ask a second question")
    parser.add_argument("--kill-in-model", action="store_true")
    parser.add_argument("--max-reasks", type=int, default=2)
    parser.add_argument("--max-thread-tokens", type=int)
    args = parser.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS model_calls (thread_id TEXT NOT NULL, pid INT NOT NULL)"
        )
    model = BilledModel(dsn=args.dsn, thread=args.thread, kill=args.kill_in_model)
    cost = ModelCostPolicy(
        max_reasks=args.max_reasks, max_thread_tokens=args.max_thread_tokens, retry_delay=0.01
    )
    llm = JournaledChatModel(model, name="llm:billed", cost=cost)

    def ask(state: State) -> dict[str, Any]:
        return {"answer": str(llm.invoke([("user", state["question"])]).content)}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    config: Any = {"configurable": {"thread_id": args.thread}}
    payload: Any = {"question": "Where is refund 8890?"}
    if args.resume:
        payload = None
    elif args.new_turn:
        payload = {"question": "And refund 8891?"}
    with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        try:
            final = graph.invoke(payload, config, durability="sync")
        except EffectOutcomeUnknown as exc:
            print(f"unknown: {exc}", flush=True)
            return EXIT_OUTCOME_UNKNOWN
    print(json.dumps(final), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
