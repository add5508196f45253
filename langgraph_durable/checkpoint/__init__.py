"""The Postgres checkpointer: `aio.py` is the source, `sync.py` its generated twin."""

from langgraph_durable.checkpoint.aio import AsyncDurablePostgresSaver
from langgraph_durable.checkpoint.sync import DurablePostgresSaver

__all__ = ["AsyncDurablePostgresSaver", "DurablePostgresSaver"]
