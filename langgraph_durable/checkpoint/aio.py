"""`AsyncDurablePostgresSaver`, where upstream keeps `AsyncPostgresSaver`: `.aio`."""

from langgraph_durable.checkpoint._asaver import AsyncDurablePostgresSaver

__all__ = ["AsyncDurablePostgresSaver"]
