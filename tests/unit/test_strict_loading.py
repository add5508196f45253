"""Safe loading under LangGraph's strict msgpack mode (`LANGGRAPH_STRICT_MSGPACK=true`).

A user who turns strict mode on asks for a narrower allow-list than our default: only
LangGraph's safe types, the types they registered and those `compile()` passes for the
graph's state schema are built. Every other data class loads as upstream's strict
serializer loads it (its stored fields, an enum's value), and what our default refuses
(a function, a class that is not a data class) is still refused. These tests ask for strict
mode by argument; `tests/integration/test_strict_msgpack_env.py` sets the environment
variable LangGraph reads when it is imported.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
from pathlib import Path
from typing import Any, NamedTuple

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    JsonPlusSerializer,
)
from pydantic import BaseModel
from pydantic import v1 as pydantic_v1

from langgraph_durable import UnsafeRowError
from langgraph_durable.serde import (
    SafeEncryptedSerializer,
    SafeSerializer,
    describing,
    make_safe,
)

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10 has no StrEnum: what it is, spelled out

    class StrEnum(str, enum.Enum):
        pass


class Model(BaseModel):
    a: int
    when: datetime.datetime


class OldModel(pydantic_v1.BaseModel):
    a: int


@dataclasses.dataclass
class Node:
    x: int
    child: Node | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Slotted:
    x: int


class Pair(NamedTuple):
    a: int
    b: str


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    ONE = 1


class Mode(StrEnum):
    FAST = "fast"


class Opaque:
    """Not a data class: refused unless registered, in either mode."""

    def __init__(self, value: int) -> None:
        self.value = value


def opaque_row(value: int) -> Any:
    """An `Opaque` as a stored row names it (LangGraph cannot serialize a plain class)."""
    return ormsgpack.Ext(
        EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb([__name__, "Opaque", {"value": value}])
    )


WHEN = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
VALUES: dict[str, Any] = {
    "pydantic": Model(a=1, when=WHEN),
    "pydantic_v1": OldModel(a=2),
    "dataclass": Node(1, Node(2)),
    "dataclass_slots": Slotted(5),
    "namedtuple": Pair(1, "x"),
    "enum": Color.RED,
    "intenum": Level.ONE,
    "strenum": Mode.FAST,
    "nested": {"items": [Slotted(1), Color.RED], "message": HumanMessage("hi", id="1")},
}

UPSTREAM_STRICT = JsonPlusSerializer(allowed_msgpack_modules=None)
"""Upstream's serializer as LANGGRAPH_STRICT_MSGPACK=true makes it by default."""


def shape(value: Any) -> Any:
    """What a loaded value is, type included at every level (`Level.ONE == 1`)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return [type(value).__name__, *(shape(item) for item in value)]
    return (type(value).__qualname__, repr(value))


@pytest.mark.parametrize("name", list(VALUES))
def test_strict_mode_loads_unregistered_data_classes_as_upstream_does(name: str) -> None:
    stored = JsonPlusSerializer().dumps_typed(VALUES[name])
    loaded = SafeSerializer(strict=True).loads_typed(stored)
    assert shape(loaded) == shape(UPSTREAM_STRICT.loads_typed(stored))
    assert not isinstance(loaded, (BaseModel, pydantic_v1.BaseModel, enum.Enum, tuple, Node))


@pytest.mark.parametrize("name", list(VALUES))
def test_the_default_mode_still_builds_them(name: str) -> None:
    stored = JsonPlusSerializer().dumps_typed(VALUES[name])
    assert shape(SafeSerializer(strict=False).loads_typed(stored)) == shape(VALUES[name])


def test_strict_mode_returns_plain_data_for_each_kind() -> None:
    serde = SafeSerializer(strict=True)

    def load(value: Any) -> Any:
        return serde.loads_typed(JsonPlusSerializer().dumps_typed(value))

    assert load(Node(1, Node(2))) == {"x": 1, "child": {"x": 2, "child": None}}
    assert load(Pair(1, "x")) == {"a": 1, "b": "x"}
    assert load(Model(a=1, when=WHEN)) == {"a": 1, "when": WHEN}
    assert [type(v) for v in (load(Color.RED), load(Level.ONE), load(Mode.FAST))] == [
        int,
        int,
        str,
    ]


def test_strict_mode_builds_what_is_registered() -> None:
    stored = JsonPlusSerializer().dumps_typed([Node(1), Color.RED])
    plain_class = ("msgpack", ormsgpack.packb(opaque_row(3)))
    for serde in (
        SafeSerializer(strict=True, allow=[Node, Color, Opaque]),
        SafeSerializer(strict=True, allow=[__name__]),
        SafeSerializer(strict=True, allowed_msgpack_modules=[Node, Color, Opaque]),
        # what compile() passes for the graph's state types (LangGraph's `with_allowlist`)
        SafeSerializer(strict=True).with_msgpack_allowlist(
            {(__name__, "Node"), (__name__, "Color"), (__name__, "Opaque")}
        ),
    ):
        assert serde.strict
        assert serde.loads_typed(stored) == [Node(1), Color.RED]
        assert isinstance(serde.loads_typed(plain_class), Opaque)


def test_strict_mode_still_refuses_what_the_default_refuses(tmp_path: Path) -> None:
    target = tmp_path / "opened-by-a-row"
    row = ormsgpack.Ext(
        EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["builtins", "open", [str(target), "w"]])
    )
    with pytest.raises(UnsafeRowError, match=r"builtins\.open"):
        SafeSerializer(strict=True).loads_typed(("msgpack", ormsgpack.packb({"a": [row]})))
    assert not target.exists()
    with pytest.raises(UnsafeRowError, match="Opaque"):
        SafeSerializer(strict=True).loads_typed(("msgpack", ormsgpack.packb(opaque_row(1))))


def test_upstreams_serializer_keeps_its_own_strictness() -> None:
    """A `JsonPlusSerializer` given to the saver is made safe with the mode it was made
    in: strict when its allow-list is not "everything" (strict mode's default `None`, or a
    list), as upstream then builds only what it lists."""
    stored = JsonPlusSerializer().dumps_typed([Node(1), Color.RED])
    permissive = make_safe(JsonPlusSerializer(allowed_msgpack_modules=True))
    assert isinstance(permissive, SafeSerializer)
    assert not permissive.strict
    assert permissive.loads_typed(stored) == [Node(1), Color.RED]
    strict = make_safe(JsonPlusSerializer(allowed_msgpack_modules=None))
    assert isinstance(strict, SafeSerializer)
    assert strict.strict
    assert strict.loads_typed(stored) == [{"x": 1, "child": None}, 1]
    listed = make_safe(JsonPlusSerializer(allowed_msgpack_modules=[Node]))
    assert isinstance(listed, SafeSerializer)
    assert listed.strict
    assert listed.loads_typed(stored) == [Node(1), 1]
    encrypted = make_safe(EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16))
    assert isinstance(encrypted, SafeEncryptedSerializer)


def test_copies_keep_the_mode() -> None:
    strict = SafeSerializer(strict=True)
    assert strict.with_msgpack_allowlist({(__name__, "Node")}).strict
    twin = describing(strict)
    assert isinstance(twin, SafeSerializer)
    assert twin.strict
    stored = JsonPlusSerializer().dumps_typed(Color.RED)
    assert type(twin.loads_typed(stored)) is int
    assert not describing(SafeSerializer(strict=False)).strict  # type: ignore[attr-defined]
