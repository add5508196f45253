"""A worker process for the durable_sleep crash tests: takes the runs of one sleeping graph.

    python tests/crash/sleep_worker.py DSN GRAPH_NAME [--async]

The graph's only node, "remind", sleeps an hour with `durable_sleep` (`adurable_sleep` and
an `AsyncWorker` with `--async`), then returns `{"log": ["woke"]}`. The worker runs what
it can take now (`run_until_idle`) and prints each run's status as JSON; the test makes it
die inside the sleep's own journaled effect with `LANGGRAPH_DURABLE_CRASH_AT`
(`effect:after_claim`, `effect:after_call`). `build` is imported by the test to resume the
run in its own process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncWorker,
    DurablePostgresSaver,
    GraphVersion,
    Run,
    Worker,
    adurable_sleep,
    durable_sleep,
)

SLEEP = timedelta(hours=1)


class State(TypedDict, total=False):
    log: list[str]


def build(saver: Any, name: str, flavour: str) -> GraphVersion:
    def remind(state: State) -> State:
        durable_sleep(SLEEP)
        return {"log": ["woke"]}

    async def aremind(state: State) -> State:
        await adurable_sleep(SLEEP)
        return {"log": ["woke"]}

    builder = StateGraph(State)
    builder.add_node("remind", aremind if flavour == "async" else remind)
    builder.add_edge(START, "remind")
    builder.add_edge("remind", END)
    return GraphVersion(name, "1", builder.compile(checkpointer=saver))


def run_sync(dsn: str, name: str) -> list[Run]:
    with DurablePostgresSaver.from_conn_string(dsn) as saver:
        return Worker(saver, [build(saver, name, "sync")]).run_until_idle()


async def run_async(dsn: str, name: str) -> list[Run]:
    async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
        return await AsyncWorker(saver, [build(saver, name, "async")]).arun_until_idle()


if __name__ == "__main__":
    dsn, name = sys.argv[1], sys.argv[2]
    ran = asyncio.run(run_async(dsn, name)) if "--async" in sys.argv[3:] else run_sync(dsn, name)
    print(json.dumps([[run.run_id, run.status.value] for run in ran]))
