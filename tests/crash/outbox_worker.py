"""A worker process for outbox crash tests.

    python tests/crash/outbox_worker.py graph DSN THREAD MODE FLAVOR [--resume]
    python tests/crash/outbox_worker.py relay DSN URL [TARGET]
    python tests/crash/outbox_worker.py frozen-relay DSN

`graph` runs n1 -> n2 -> n3; every node emits `node.done` with its name. `relay` drains
the outbox once to the broker the URL names (`publisher_for`: a webhook's secret comes
from LANGGRAPH_DURABLE_WEBHOOK_SECRET; TARGET is a routing key or subject) and exits.
Crash points come from `LANGGRAPH_DURABLE_CRASH_AT` (`put:after_commit`,
`put_writes:parked`, `relay:after_publish`, ...).

Exit codes: 0 finished, 3 EmptyInputError (nothing was saved: send the input again).
"""

from __future__ import annotations

import asyncio
import operator
import os
import signal
import sys
from typing import Annotated, Any

from langgraph.errors import EmptyInputError
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver, emit
from langgraph_durable.outbox import OutboxEvent, OutboxRelay
from langgraph_durable.outbox.publishers import CallbackPublisher, publisher_for

NODES = ["n1", "n2", "n3"]


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def node(name: str) -> Any:
    def run(state: State) -> State:
        emit("node.done", {"node": name})
        return {"log": [name]}

    return run


def builder() -> StateGraph[State, None, State, State]:
    graph = StateGraph(State)
    previous = START
    for name in NODES:
        graph.add_node(name, node(name))
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph


def run_graph(dsn: str, thread: str, mode: Any, flavor: str, resume: bool) -> int:
    config: Any = {"configurable": {"thread_id": thread}}
    payload: State | None = None if resume else {"log": []}
    try:
        if flavor == "sync":
            with DurablePostgresSaver.from_conn_string(dsn) as saver:
                builder().compile(checkpointer=saver).invoke(payload, config, durability=mode)
        else:

            async def main() -> None:
                async with AsyncDurablePostgresSaver.from_conn_string(dsn) as saver:
                    app = builder().compile(checkpointer=saver)
                    await app.ainvoke(payload, config, durability=mode)

            asyncio.run(main())
    except EmptyInputError:
        return 3
    return 0


async def run_relay(dsn: str, url: str, target: str | None) -> None:
    publisher = publisher_for(url, target=target)
    relay = OutboxRelay(dsn, publisher)
    while (await relay.run_once()).claimed:
        pass
    await relay.aclose()
    await publisher.aclose()


def run_frozen_relay(dsn: str) -> None:
    """A relay that stops its own process (SIGSTOP: a paused container, a VM stall) as it
    publishes the first event of a round, its transaction and row locks open."""

    def freeze(event: OutboxEvent) -> None:
        os.kill(os.getpid(), signal.SIGSTOP)

    relay = OutboxRelay(dsn, CallbackPublisher(freeze), publish_timeout=0.5)
    asyncio.run(relay.run_once())


if __name__ == "__main__":
    what, dsn, *rest = sys.argv[1:]
    if what == "frozen-relay":
        run_frozen_relay(dsn)
        sys.exit(0)
    if what == "graph":
        thread, mode, flavor, *flags = rest
        sys.exit(run_graph(dsn, thread, mode, flavor, "--resume" in flags))
    asyncio.run(run_relay(dsn, rest[0], rest[1] if len(rest) > 1 else None))
