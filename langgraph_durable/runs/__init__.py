"""Runs that finish by themselves: a registry of runs, and workers that take and recover them.

refunds = GraphVersion("refunds", "2026-12", builder.compile(checkpointer=saver))
runs = RunRegistry(saver)
run = runs.create(refunds, {"order_id": "8890"})      # queued, in Postgres
Worker(saver, [refunds]).run_forever()                 # in any number of processes
runs.wait_for(run.run_id).status                       # RunStatus.SUCCESS
"""

from langgraph_durable.runs._aregistry import AsyncRunRegistry
from langgraph_durable.runs._aworker import AsyncWorker
from langgraph_durable.runs._events import RUN_EVENTS
from langgraph_durable.runs._model import MAX_SECONDS, GraphVersion, Run, RunStatus
from langgraph_durable.runs._registry import RunRegistry
from langgraph_durable.runs._sleep import (
    adurable_sleep,
    adurable_sleep_until,
    durable_sleep,
    durable_sleep_until,
)
from langgraph_durable.runs._worker import Worker

__all__ = [
    "MAX_SECONDS",
    "RUN_EVENTS",
    "AsyncRunRegistry",
    "AsyncWorker",
    "GraphVersion",
    "Run",
    "RunRegistry",
    "RunStatus",
    "Worker",
    "adurable_sleep",
    "adurable_sleep_until",
    "durable_sleep",
    "durable_sleep_until",
]
