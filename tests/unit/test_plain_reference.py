"""`serde.plain_reference`: the check's shortcut for custom values that nest no other.

It reads a value's (module, name) from its first bytes instead of decoding it; every
answer it gives must be the one decoding gives, and it must give none for a payload that
might nest a custom value, since the nested one would then go unchecked.
"""

from __future__ import annotations

import random
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)

from langgraph_durable import UnsafeRowError
from langgraph_durable.serde import SafeSerializer, plain_reference


def ext_payloads(value: Any) -> list[tuple[int, bytes]]:
    """The top-level custom values of a msgpack-serialized value, as the loader sees them."""
    found: list[tuple[int, bytes]] = []

    def hook(code: int, payload: bytes) -> None:
        found.append((code, payload))

    ormsgpack.unpackb(
        JsonPlusSerializer().dumps_typed(value)[1], ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS
    )
    return found


def test_a_message_is_read_from_its_first_bytes() -> None:
    [(code, payload)] = ext_payloads(HumanMessage(content="hello", id="1"))
    assert plain_reference(code, payload) == ("langchain_core.messages.human", "HumanMessage")


@pytest.mark.parametrize(
    "parts",
    [
        ["m" * 40, "Name", {}],  # str 8
        ["m", "N" * 300, [1]],  # str 16
        ["m", "N", *range(20)],  # array 16
        ["módulo", "Nämé", {"a": "b"}],  # UTF-8 names: their bytes include no marker
    ],
    ids=["str8", "str16", "array16", "utf8"],
)
def test_every_length_form_is_read(parts: list[Any]) -> None:
    payload = ormsgpack.packb(parts)
    assert plain_reference(EXT_CONSTRUCTOR_POS_ARGS, payload) == (parts[0], parts[1])


@pytest.mark.parametrize(
    ("code", "parts"),
    [
        # a custom value inside: it must be decoded and checked
        (EXT_CONSTRUCTOR_KW_ARGS, ["m", "N", {"x": ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, b"")}]),
        # text whose UTF-8 bytes hold a marker byte (U+01C0 is c7 80): decoded to be sure
        (EXT_CONSTRUCTOR_KW_ARGS, ["m", "N", {"x": "\u01c0"}]),
        # a method call: its method is the fourth element, left to the full check
        (EXT_METHOD_SINGLE_ARG, ["datetime", "datetime", "x", "fromisoformat"]),
        (EXT_CONSTRUCTOR_POS_ARGS, ["only-a-module"]),
        (EXT_CONSTRUCTOR_POS_ARGS, [1, "N", []]),
        (EXT_CONSTRUCTOR_POS_ARGS, {"m": "N"}),
    ],
    ids=["nested", "marker-in-text", "method", "one-element", "not-a-string", "a-map"],
)
def test_anything_else_is_left_to_decoding(code: int, parts: Any) -> None:
    assert plain_reference(code, ormsgpack.packb(parts)) is None


def test_cut_or_broken_payloads_are_left_to_decoding() -> None:
    payload = ormsgpack.packb(["module", "Name", {}])
    for end in range(len(payload) - 1):  # every prefix short of the name's last byte
        if end < 1 + 7 + 5:
            assert plain_reference(EXT_CONSTRUCTOR_POS_ARGS, payload[:end]) is None
    assert plain_reference(EXT_CONSTRUCTOR_POS_ARGS, b"\x93\xa2\xff\xfe\xa1N\x90") is None


def test_its_answers_are_those_of_decoding() -> None:
    rng = random.Random(7)
    alphabet = [*"abcdefghij. _", "é", "\u01c0", "\u4e2d", "\U0001f600", "\x00"]
    checked = 0
    for _ in range(3000):
        module = "".join(rng.choices(alphabet, k=rng.randint(0, 40)))
        name = "".join(rng.choices(alphabet, k=rng.choice([3, 30, 300])))
        number = rng.randint(-(2**40), 2**40)
        rest = rng.choice([[], [number], [{"k": rng.random()}], [b"\xd4\xc7"]])
        payload = ormsgpack.packb([module, name, *rest])
        found = plain_reference(EXT_PYDANTIC_V2, payload)
        if found is not None:
            checked += 1
            assert found == tuple(ormsgpack.unpackb(payload)[:2])
            assert not any(byte in payload for byte in b"\xc7\xc8\xc9\xd4\xd5\xd6\xd7\xd8")
    assert checked > 100


def test_messages_load_as_upstream_loads_them() -> None:
    value = [
        HumanMessage(content="hi \u01c0 there", id="h"),
        AIMessage(content="ok", id="a", tool_calls=[{"name": "t", "args": {"q": 1}, "id": "c"}]),
        ToolMessage(content="done", tool_call_id="c", id="t"),
    ]
    dumped = JsonPlusSerializer().dumps_typed(value)
    assert SafeSerializer().loads_typed(dumped) == JsonPlusSerializer().loads_typed(dumped)


def test_a_refused_plain_value_is_refused() -> None:
    payload = ormsgpack.packb(["os", "system", ["x"]])
    assert plain_reference(EXT_CONSTRUCTOR_POS_ARGS, payload) == ("os", "system")
    row = {"v": ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, payload)}
    with pytest.raises(UnsafeRowError, match=r"os\.system"):
        SafeSerializer().loads_typed(("msgpack", ormsgpack.packb(row)))


def test_a_refused_value_inside_an_allowed_message_is_refused() -> None:
    inside = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", ["x"]]))
    message = ormsgpack.packb(
        ["langchain_core.messages.human", "HumanMessage", {"content": "hi", "extra": inside}]
    )
    row = [ormsgpack.Ext(EXT_PYDANTIC_V2, message)]
    with pytest.raises(UnsafeRowError, match=r"os\.system"):
        SafeSerializer().loads_typed(("msgpack", ormsgpack.packb(row)))
