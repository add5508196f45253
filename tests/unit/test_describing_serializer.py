"""Showing stored values without the application's code (`DescribingSerializer`).

The CLI's read commands and the console run without the application's modules. They show
a value whose class may not be built as its stored fields, and still never import or call
anything on behalf of a row.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_NUMPY_ARRAY,
    EXT_PYDANTIC_V2,
)

from langgraph_durable.serde import (
    STORED_CLASS,
    DescribingSerializer,
    SafeEncryptedSerializer,
    SafeSerializer,
    describing,
)


def ext(code: int, *parts: Any) -> Any:
    return ormsgpack.Ext(code, ormsgpack.packb(list(parts)))


def stored(value: Any) -> Any:
    """`value` as LangGraph stores it, as an object that packs to the same bytes."""
    packed = SafeSerializer().dumps_typed(value)[1]
    return ormsgpack.unpackb(packed, ext_hook=lambda code, data: ormsgpack.Ext(code, data))


def test_a_class_of_a_module_not_imported_is_shown_as_its_fields() -> None:
    stamp = datetime(2026, 12, 7, tzinfo=timezone.utc)
    deal = ext(
        EXT_PYDANTIC_V2,
        "not_imported_app.models",
        "Deal",
        {"name": "a", "amount": 3},
        "model_validate_json",
    )
    row = ormsgpack.packb({"deal": deal, "when": stored(stamp)})

    shown = DescribingSerializer().loads_typed(("msgpack", row))

    assert shown == {
        "deal": {STORED_CLASS: "not_imported_app.models.Deal", "name": "a", "amount": 3},
        "when": stamp,  # LangGraph's own safe types are still built
    }
    assert "not_imported_app" not in sys.modules


def test_values_nested_in_a_described_value_are_built_or_described() -> None:
    line = ext(EXT_CONSTRUCTOR_POS_ARGS, "not_imported_app.models", "Line", [1, 2])
    order = ext(
        EXT_CONSTRUCTOR_KW_ARGS,
        "not_imported_app.models",
        "Order",
        {"message": stored(HumanMessage("hi", id="m1")), "line": line},
    )

    shown = DescribingSerializer().loads_typed(("msgpack", ormsgpack.packb(order)))

    assert shown[STORED_CLASS] == "not_imported_app.models.Order"
    assert shown["message"] == HumanMessage("hi", id="m1")
    assert shown["line"] == {STORED_CLASS: "not_imported_app.models.Line", "value": [1, 2]}


def test_a_reference_to_a_function_is_shown_and_never_called(tmp_path: Path) -> None:
    target = tmp_path / "written"
    evil = ext(EXT_CONSTRUCTOR_POS_ARGS, "builtins", "open", [str(target), "w"])

    shown = DescribingSerializer().loads_typed(("msgpack", ormsgpack.packb({"x": evil})))

    assert shown == {"x": {STORED_CLASS: "builtins.open", "value": [str(target), "w"]}}
    assert not target.exists()


def test_an_array_is_described_when_numpy_is_not_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "numpy", raising=False)  # as in a process without it
    array = ext(EXT_NUMPY_ARRAY, "<f8", [2], "C", b"\0" * 16)

    shown = DescribingSerializer().loads_typed(("msgpack", ormsgpack.packb(array)))

    assert shown == {STORED_CLASS: "numpy.ndarray", "dtype": "<f8", "shape": [2]}
    assert "numpy" not in sys.modules


def test_the_twin_keeps_the_allow_list_and_the_cipher() -> None:
    class Xor:
        def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
            return "xor", bytes(b ^ 7 for b in plaintext)

        def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
            return bytes(b ^ 7 for b in ciphertext)

    allowed = SafeSerializer(allow=[("not_imported_app.models", "Deal")])
    assert describing(allowed).allowed == allowed.allowed  # type: ignore[attr-defined]

    encrypted = SafeEncryptedSerializer(Xor())
    stored = encrypted.dumps_typed({"x": 1})
    twin = describing(encrypted)
    assert isinstance(twin, SafeEncryptedSerializer)
    assert isinstance(twin.serde, DescribingSerializer)
    assert twin.loads_typed(stored) == {"x": 1}
