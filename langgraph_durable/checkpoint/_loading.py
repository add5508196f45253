"""What both savers share about loading: the safe serializer (`langgraph_durable.serde`).

A saver is made with `make_safe(serde)`, so LangGraph's own serializers are replaced by
their safe equivalents. Under `LANGGRAPH_STRICT_MSGPACK=true`, `compile()` asks the saver
for a copy that also allows the graph's state types (`with_allowlist`); ours widens its
own serializer instead of copying itself, because the saver's connections, parked writes
and effect journal belong to this object, and a copy would have none of them.
"""

from __future__ import annotations

from collections.abc import Collection

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_durable.serde import SafeEncryptedSerializer, SafeSerializer, make_safe

__all__ = ["SafeLoadingSaver"]


class SafeLoadingSaver(BaseCheckpointSaver[str]):
    """A saver whose loads refuse class references that are not allowed."""

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=make_safe(serde))

    def with_allowlist(
        self, extra_allowlist: Collection[tuple[str, ...]]
    ) -> BaseCheckpointSaver[str]:
        """This saver, its serializer now also allowing `extra_allowlist` (the union of
        every graph compiled with it). A serializer of another kind is left as it is."""
        if isinstance(self.serde, (SafeSerializer, SafeEncryptedSerializer)):
            self.serde = self.serde.with_msgpack_allowlist(extra_allowlist)
        return self
