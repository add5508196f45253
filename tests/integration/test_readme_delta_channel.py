"""The README's recommended setting for long chats runs on our saver as documented.

The `DeltaChannel` snippet is taken from README.md itself, so the docs cannot drift from
what works: a chat on it round-trips through the saver (also from a fresh saver), and the
message list is not stored whole at every step.
"""

from __future__ import annotations

import re
import sys
import types
import uuid
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph

from langgraph_durable import DurablePostgresSaver

README = Path(__file__).resolve().parents[2] / "README.md"
TURNS = 12


def readme_chat_state() -> Any:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("recommended setting for long chats") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert snippet is not None, "the README lost its DeltaChannel snippet"
    # A module of its own, as in a user's code: LangGraph resolves the state's annotations
    # through the module the class was defined in.
    module = types.ModuleType("readme_delta_channel_snippet")
    sys.modules[module.__name__] = module
    exec(compile(snippet.group(1), "README.md", "exec"), module.__dict__)
    return module.ChatState


def chat_graph(state: Any) -> Any:
    def assistant(s: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(s['messages']) // 2}")]}

    builder = StateGraph(state)
    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    return builder


def test_readme_delta_channel_chat_round_trips_and_stores_messages_once(db_dsn: str) -> None:
    thread = f"readme-delta-{uuid.uuid4()}"
    config: Any = {"configurable": {"thread_id": thread}}
    builder = chat_graph(readme_chat_state())
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        for turn in range(TURNS):
            graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    with DurablePostgresSaver.from_conn_string(db_dsn) as fresh:
        state = builder.compile(checkpointer=fresh).get_state(config)
    contents = [m.content for m in state.values["messages"]]
    assert contents == [
        text for turn in range(TURNS) for text in (f"question {turn}", f"answer {turn}")
    ]
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s AND channel = 'messages'",
            (thread,),
        ).fetchone()
    assert row is not None
    assert row[0] < TURNS // 2, "the message list was stored whole at most steps"
