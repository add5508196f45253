"""`serde.holds_no_other`: the shortcut that lets a plain custom value be checked in the
one decoding that builds it.

A value that holds no other custom value names one class, which LangGraph's builder asks
about before it imports or calls anything. The shortcut must say so only when that is
true: a nested method call, numpy array or kind of value LangGraph does not know would
otherwise load without our refusal (LangGraph leaves them unbuilt, or imports numpy).
"""

from __future__ import annotations

import dataclasses
import random
import sys
import types
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
from langgraph_durable.serde import SafeSerializer, holds_no_other


@dataclasses.dataclass
class Reading:
    """A data class of an imported module: loads without being registered."""

    sensor: str
    value: float


def ext_payloads(value: Any) -> list[tuple[int, bytes]]:
    """The top-level custom values of a msgpack-serialized value, as the loader sees them."""
    found: list[tuple[int, bytes]] = []

    def hook(code: int, payload: bytes) -> None:
        found.append((code, payload))

    ormsgpack.unpackb(
        JsonPlusSerializer().dumps_typed(value)[1],
        ext_hook=hook,
        option=ormsgpack.OPT_NON_STR_KEYS,
    )
    return found


def load(row: Any) -> Any:
    return SafeSerializer().loads_typed(("msgpack", ormsgpack.packb(row)))


def test_a_message_holds_no_other() -> None:
    [(code, payload)] = ext_payloads(HumanMessage(content="hello", id="1"))
    assert holds_no_other(code, payload)


@pytest.mark.parametrize(
    ("code", "parts"),
    [
        # a custom value inside: it must be decoded and checked
        (EXT_CONSTRUCTOR_KW_ARGS, ["m", "N", {"x": ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, b"")}]),
        # text whose UTF-8 bytes hold a marker byte (U+01C0 is c7 80): decoded to be sure
        (EXT_CONSTRUCTOR_KW_ARGS, ["m", "N", {"x": "\u01c0"}]),
        # a method call: LangGraph's own list decides those, so ours checks them first
        (EXT_METHOD_SINGLE_ARG, ["datetime", "datetime", "x", "fromisoformat"]),
        (99, ["m", "N", {}]),  # a code LangGraph does not build from
    ],
    ids=["nested", "marker-in-text", "method", "unknown-code"],
)
def test_anything_else_is_decoded_first(code: int, parts: Any) -> None:
    assert not holds_no_other(code, ormsgpack.packb(parts))
    assert not holds_no_other(EXT_CONSTRUCTOR_POS_ARGS, b"")
    # a fixext byte with its type cut off: left to decoding
    assert not holds_no_other(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["m", "N", []]) + b"\xd4")


def test_it_never_says_so_of_a_value_holding_another() -> None:
    rng = random.Random(7)
    plain = ["abc", "é", "\u4e2d", "\u05d0", "a" * 150, 212, 70_000, -3, 2.5, b"\xd4", None]
    said = 0
    seen: list[int] = []
    for _ in range(5000):
        fields: list[Any] = [rng.choice([*plain, [1, {"k": 2}]]) for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.3:
            # any type LangGraph builds from, any size: fixext 1-16 and ext 8/16
            size = rng.choice([0, 1, 2, 3, 4, 8, 15, 16, 17, 200, 300])
            inner = ormsgpack.Ext(rng.randint(0, 7), rng.randbytes(size))
            fields.insert(rng.randint(0, len(fields)), inner)
        payload = ormsgpack.packb(["module", "Name", fields])
        if holds_no_other(EXT_CONSTRUCTOR_POS_ARGS, payload):
            said += 1
            ormsgpack.unpackb(payload, ext_hook=lambda code, data: seen.append(code))
    assert seen == []
    assert said > 300


@pytest.mark.parametrize(
    "text",
    [
        "\u05e9\u05dc\u05d5\u05dd",
        "\u0645\u0631\u062d\u0628\u0627",
        "\u0562\u0561\u0580\u0565\u0582",
    ],
    ids=["hebrew", "arabic", "armenian"],
)
def test_text_whose_bytes_look_like_a_custom_value_takes_the_full_check(text: str) -> None:
    # UTF-8 lead bytes d4-d8 are fixext bytes in msgpack: seen in the first 128 bytes
    [(code, payload)] = ext_payloads(HumanMessage(content=text * 9, id="1"))
    assert not holds_no_other(code, payload)
    value = [HumanMessage(content=text * 9, id="1"), AIMessage(content=text, id="2")]
    dumped = JsonPlusSerializer().dumps_typed(value)
    assert SafeSerializer().loads_typed(dumped) == JsonPlusSerializer().loads_typed(dumped)


def test_a_custom_value_past_the_first_128_bytes_is_seen() -> None:
    inner = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", ["x"]]))
    payload = ormsgpack.packb(["module", "Name", {"text": "a" * 300, "x": inner}])
    assert payload.index(b"\xc7") > 128
    assert not holds_no_other(EXT_CONSTRUCTOR_KW_ARGS, payload)
    assert holds_no_other(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb(["module", "Name", "a" * 300]))


def test_messages_load_as_upstream_loads_them() -> None:
    value = [
        HumanMessage(content="hi \u01c0 there", id="h"),
        AIMessage(content="ok", id="a", tool_calls=[{"name": "t", "args": {"q": 1}, "id": "c"}]),
        ToolMessage(content="done", tool_call_id="c", id="t"),
        Reading("s1", 21.5),
    ]
    dumped = JsonPlusSerializer().dumps_typed(value)
    loaded = SafeSerializer().loads_typed(dumped)
    assert loaded == JsonPlusSerializer().loads_typed(dumped)
    assert isinstance(loaded[3], Reading)


def test_a_refused_plain_value_is_refused_by_name() -> None:
    row = {"v": ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", ["x"]]))}
    assert holds_no_other(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", ["x"]]))
    with pytest.raises(UnsafeRowError, match=r"os\.system"):
        load(row)


def test_a_missing_class_loads_as_its_fields_as_upstream_loads_it() -> None:
    payload = ormsgpack.packb([__name__, "NoSuchClass", {"a": 1}])
    row = [ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, payload)]
    assert load(row) == [{"a": 1}]


def test_a_refused_value_inside_an_allowed_message_is_refused() -> None:
    inside = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", ["x"]]))
    message = ormsgpack.packb(
        ["langchain_core.messages.human", "HumanMessage", {"content": "hi", "extra": inside}]
    )
    with pytest.raises(UnsafeRowError, match=r"os\.system"):
        load([ormsgpack.Ext(EXT_PYDANTIC_V2, message)])


def test_a_method_call_inside_an_allowed_message_is_refused() -> None:
    # LangGraph's builder would leave an unknown method uncalled without a word: ours
    # decodes such a message first, finds the call and refuses the row.
    call = ormsgpack.Ext(EXT_METHOD_SINGLE_ARG, ormsgpack.packb(["os", "popen", "x", "read"]))
    message = ormsgpack.packb(
        ["langchain_core.messages.human", "HumanMessage", {"content": "hi", "extra": call}]
    )
    with pytest.raises(UnsafeRowError, match=r"os\.popen\.read"):
        load([ormsgpack.Ext(EXT_PYDANTIC_V2, message)])


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 3, 300, 70_000])
def test_every_form_of_a_nested_custom_value_is_seen(size: int) -> None:
    # fixext 1/2/4/8/16 (d4-d8), ext 8/16/32 (c7-c9)
    inner = ormsgpack.Ext(EXT_METHOD_SINGLE_ARG, b"a" * size)
    payload = ormsgpack.packb(["module", "Name", {"x": inner}])
    assert not holds_no_other(EXT_CONSTRUCTOR_KW_ARGS, payload)


def test_a_numpy_array_is_refused_until_numpy_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    array = ormsgpack.Ext(6, ormsgpack.packb(["<f8", [1], "C", b"\x00" * 8]))
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    imports: list[str] = []
    monkeypatch.setattr(
        "builtins.__import__",
        lambda name, *a, _real=__import__, **k: imports.append(name) or _real(name, *a, **k),
    )
    with pytest.raises(UnsafeRowError, match=r"numpy\.ndarray"):
        load([array])
    assert "numpy" not in imports
    with pytest.raises(UnsafeRowError, match=r"numpy\.ndarray"):  # inside a message, too
        load([ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb(["m", "N", {"a": array}]))])


def test_a_modules_lazy_attributes_are_not_looked_up_for_a_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    lazy = types.ModuleType("lgd_lazy_module")

    def lazy_getattr(name: str) -> object:
        asked.append(name)  # a package that imports a submodule on first use
        raise AttributeError(name)

    lazy.__getattr__ = lazy_getattr  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "lgd_lazy_module", lazy)
    row = [ormsgpack.Ext(EXT_PYDANTIC_V2, ormsgpack.packb(["lgd_lazy_module", "Model", {}]))]
    assert load(row) == [{}]  # no such class held by the module: its stored fields
    assert asked == []


def test_a_class_that_fails_to_answer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = types.ModuleType("lgd_broken_module")
    broken.Thing = type("Thing", (), {"__module__": "lgd_broken_module"})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lgd_broken_module", broken)

    def fails(cls: object) -> bool:
        raise RuntimeError("cannot tell")

    monkeypatch.setattr(dataclasses, "is_dataclass", fails)
    row = [ormsgpack.Ext(EXT_PYDANTIC_V2, ormsgpack.packb(["lgd_broken_module", "Thing", {}]))]
    with pytest.raises(UnsafeRowError, match=r"lgd_broken_module\.Thing"):
        load(row)
