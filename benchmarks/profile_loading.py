"""What safe loading costs: our `SafeSerializer` against LangGraph's own, unchecked load.

    python benchmarks/profile_loading.py [--messages 400] [--rounds 30] [--calls 5]

A chat's message list (`bench_large.chat`: human and AI messages with ids, response
metadata and token usage) is loaded by LangGraph's `JsonPlusSerializer` and by ours,
taking turns, in Latin, Chinese and Arabic script (the same chat with each word replaced
by one in that script), and as 50 short messages. Each line is the fastest of the rounds
(the collector off, as `timeit` runs), since the question is the work each load does,
not the machine's noise. No database.

The script matters: the check reads a message's bytes to tell whether it holds another
custom value (`serde.holds_no_other`), and text in Arabic, Hebrew or Armenian script
holds bytes that could start one, which need a closer look. Values whose bytes show
another may be inside take the full check (decoded to check, then again to build).
"""

from __future__ import annotations

import argparse
import random
import timeit
from typing import Any

from bench_large import chat
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.serde import SafeSerializer

WORDS = {
    "Chinese": ["你好", "世界", "消息", "模型", "回答", "问题", "数据", "时间"],
    "Arabic": ["مرحبا", "عالم", "رسالة", "نموذج", "جواب", "سؤال", "بيانات", "وقت"],
}


def in_script(messages: list[AnyMessage], words: list[str], seed: int = 3) -> list[AnyMessage]:
    """The same messages with every word replaced by a word of another script."""
    rng = random.Random(seed)

    def swap(text: str) -> str:
        return " ".join(rng.choice(words) for _ in text.split())

    return [m.model_copy(update={"content": swap(str(m.content))}) for m in messages]


def short_messages(count: int = 50) -> list[AnyMessage]:
    return [
        HumanMessage(content="hello there " * 5, id=f"h{i}")
        if i % 2
        else AIMessage(content="fine " * 8, id=f"a{i}")
        for i in range(count)
    ]


def cases(messages: int) -> dict[str, list[AnyMessage]]:
    latin = chat(messages)
    return {
        f"{messages}-message chat, Latin script": latin,
        **{
            f"{messages}-message chat, {script} script": in_script(latin, words)
            for script, words in WORDS.items()
        },
        "50 short messages": short_messages(),
    }


def fastest_ms(load: Any, data: tuple[str, bytes], calls: int) -> float:
    return timeit.timeit(lambda: load(data), number=calls) / calls * 1000


def measure(messages: int, rounds: int, calls: int) -> list[tuple[str, float, float]]:
    """(case, LangGraph's ms, ours' ms): the fastest of `rounds` alternating rounds."""
    langgraph, safe = JsonPlusSerializer(), SafeSerializer()
    found = []
    for name, value in cases(messages).items():
        data = langgraph.dumps_typed(value)
        if safe.loads_typed(data) != langgraph.loads_typed(data):
            raise AssertionError(f"{name}: our load differs from LangGraph's")
        theirs, mine = [], []
        for _ in range(rounds):
            theirs.append(fastest_ms(langgraph.loads_typed, data, calls))
            mine.append(fastest_ms(safe.loads_typed, data, calls))
        found.append((name, min(theirs), min(mine)))
    return found


def report(found: list[tuple[str, float, float]]) -> str:
    lines = [
        "| value | LangGraph's load, ms | ours, ms | ours / LangGraph's |",
        "|---|---:|---:|---:|",
    ]
    for name, theirs, mine in found:
        lines.append(f"| {name} | {theirs:.3f} | {mine:.3f} | {mine / theirs:.2f}x |")
    return "\n".join(lines)


def _main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=5, help="loads per round")
    args = parser.parse_args()
    if min(args.messages, args.rounds, args.calls) < 1:
        parser.error("--messages, --rounds and --calls must be positive")
    print(report(measure(args.messages, args.rounds, args.calls)))


if __name__ == "__main__":
    _main()
