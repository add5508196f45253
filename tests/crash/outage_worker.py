"""A worker process for the outage test: runs the "shipments" graph until stopped.

    python tests/crash/outage_worker.py DSN RECEIVER_URL [--lease SECONDS] [--create N]

The graph: pick -> pack -> label -> ship, each an `@effect` that POSTs to a real HTTP
receiver (`tests/receivers.py`) in the test process. The receiver does not dedupe; each
effect has a `reconcile` hook that asks the receiver by key, so an attempt whose outcome
is open after an outage is looked up, never sent again.

`--create N` only creates N runs (one thread each) and prints their ids as JSON. Otherwise
the process prints "ready" and runs a worker until SIGTERM, then exits 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for receivers.py

from receivers import acted, post

from langgraph_durable import (
    DurablePostgresSaver,
    GraphVersion,
    Reconciled,
    RunRegistry,
    Worker,
    effect,
)

STEPS = ("pick", "pack", "label", "ship")


class Shipment(TypedDict, total=False):
    order_id: str
    done: list[int]


def build(saver: DurablePostgresSaver, url: str) -> GraphVersion:
    def look(idempotency_key: str, **_: Any) -> Reconciled:
        found = acted(url, idempotency_key)
        return Reconciled.completed(found) if found is not None else Reconciled.absent()

    builder = StateGraph(Shipment)
    previous = START
    for name in STEPS:

        @effect(name=f"shipments.{name}", reconcile=look)
        def act(order_id: str, idempotency_key: str = "") -> int:
            # A long timeout: the test holds some requests open across the outage.
            return post(url, idempotency_key, order_id, timeout=120)

        def node(state: Shipment, act: Any = act) -> Shipment:
            return {"done": [*state.get("done", []), act(state["order_id"])]}

        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return GraphVersion("shipments", "1", builder.compile(checkpointer=saver))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("url")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--create", type=int)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    with DurablePostgresSaver.from_conn_string(args.dsn) as saver:
        saver.setup()
        graph = build(saver, args.url)
        if args.create is not None:
            runs = RunRegistry(saver)
            ids = [runs.create(graph, {"order_id": f"s-{i}"}).run_id for i in range(args.create)]
            print(json.dumps(ids), flush=True)
            return 0
        worker = Worker(saver, [graph], lease_seconds=args.lease, idle_wait=0.5)
        signal.signal(signal.SIGTERM, lambda *_: worker.stop())
        print("ready", flush=True)
        worker.run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
