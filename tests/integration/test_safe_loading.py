"""Safe loading: a row rewritten by someone with write access runs no code when read.

Each test writes a real checkpoint (or journal row), rewrites its stored bytes in the
table the way an attacker with an SQL session would, and reads it back through the saver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import uuid
from pathlib import Path
from typing import Any

import ormsgpack
import psycopg
import pytest
from langgraph.checkpoint.serde.base import CipherProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_NUMPY_ARRAY,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    DurablePostgresSaver,
    EffectJournal,
    UnsafeRowError,
    effect,
)
from langgraph_durable.serde import SafeEncryptedSerializer, SafeSerializer


def reference(module: str, name: str, args: list[Any], code: int = EXT_CONSTRUCTOR_POS_ARGS) -> Any:
    return ormsgpack.Ext(code, ormsgpack.packb([module, name, args]))


def evil_blob(path: Path) -> bytes:
    """A value that, loaded by a permissive reader, calls builtins.open(path, "w")."""
    return ormsgpack.packb({"ok": [1, 2, reference("builtins", "open", [str(path), "w"])]})


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Order(BaseModel):
    order_id: str
    point: Point
    color: Color


class Opaque:
    """A plain class: not a data class, so only loaded when registered."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.value == self.value


class XorCipher(CipherProtocol):
    """A toy cipher for the test: what matters here is the suffix, not the strength."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ 0x5A for b in ciphertext)


class State(TypedDict, total=False):
    value: Any


def graph_with(saver: Any, value: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("put", lambda s: {"value": value})
    builder.add_edge(START, "put")
    builder.add_edge("put", END)
    return builder.compile(checkpointer=saver)


@pytest.fixture(scope="module", autouse=True)
def tables(db_dsn: str) -> None:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()


def tamper_blobs(dsn: str, thread: str, type_: str, blob: bytes) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(
            "UPDATE checkpoint_blobs SET type = %s, blob = %s "
            "WHERE thread_id = %s AND channel = 'value'",
            (type_, blob, thread),
        )
        return cur.rowcount


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_rewritten_blob_names_a_function_and_nothing_runs(
    flavor: str, db_dsn: str, tmp_path: Path
) -> None:
    target = tmp_path / "created-by-a-row"
    thread = f"evil-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        graph_with(saver, {"items": [1, 2]}).invoke({}, config)
    assert tamper_blobs(db_dsn, thread, "msgpack", evil_blob(target)) >= 1

    async def aread() -> None:
        async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as asaver:
            await asaver.aget_tuple(config)

    def read() -> None:
        with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
            saver.get_tuple(config)

    with pytest.raises(UnsafeRowError, match=r"builtins\.open") as raised:
        read() if flavor == "sync" else asyncio.run(aread())
    assert "register it" in str(raised.value)
    assert not target.exists()


def test_upstreams_encrypted_serializer_is_made_to_refuse_rows_without_a_cipher(
    db_dsn: str, tmp_path: Path
) -> None:
    target = tmp_path / "created-by-a-plaintext-row"
    serde = EncryptedSerializer(XorCipher())
    thread = f"evil-enc-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        assert isinstance(saver.serde, SafeEncryptedSerializer)
        graph_with(saver, {"items": [1]}).invoke({}, config)
        assert saver.get_tuple(config) is not None  # its own encrypted rows load
        # a plaintext row with a harmless value is refused too: anyone could have written it
        tamper_blobs(db_dsn, thread, "msgpack", ormsgpack.packb({"items": [9]}))
        with pytest.raises(UnsafeRowError, match="carries no cipher"):
            saver.get_tuple(config)
        tamper_blobs(db_dsn, thread, "msgpack", evil_blob(target))
        with pytest.raises(UnsafeRowError):
            saver.get_tuple(config)
    assert not target.exists()
    migrating = SafeEncryptedSerializer(serde.cipher, allow_plaintext=True)
    tamper_blobs(db_dsn, thread, "msgpack", ormsgpack.packb({"items": [9]}))
    with DurablePostgresSaver.from_conn_string(db_dsn, serde=migrating) as saver:
        found = saver.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["value"] == {"items": [9]}


def test_the_applications_data_classes_load_without_registering(db_dsn: str) -> None:
    thread = f"models-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    order = Order(order_id="8890", point=Point(1, 2), color=Color.RED)
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        graph_with(saver, order).invoke({}, config)
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        found = saver.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["value"] == order


def opaque_blob(value: int) -> bytes:
    ref = ormsgpack.Ext(
        EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb([__name__, "Opaque", {"value": value}])
    )
    return ormsgpack.packb(ref)


def test_a_plain_class_loads_only_when_registered(db_dsn: str) -> None:
    thread = f"opaque-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        graph_with(saver, {"items": [1]}).invoke({}, config)
        tamper_blobs(db_dsn, thread, "msgpack", opaque_blob(7))
        with pytest.raises(UnsafeRowError, match="Opaque"):
            saver.get_tuple(config)
    for registered in (
        SafeSerializer(allow=[Opaque]),
        SafeSerializer(allow=[(__name__, "Opaque")]),
        SafeSerializer(allow=[__name__]),
        # LangGraph's own keyword, which its log names when it blocks a class
        SafeSerializer(allowed_msgpack_modules=[(__name__, "Opaque")]),
    ):
        with DurablePostgresSaver.from_conn_string(db_dsn, serde=registered) as saver:
            found = saver.get_tuple(config)
        assert found is not None
        assert found.checkpoint["channel_values"]["value"] == Opaque(7)


def test_a_module_that_is_not_imported_is_never_imported_for_a_row() -> None:
    serde = SafeSerializer()
    blob = ormsgpack.packb(reference("antigravity", "Anything", [], code=EXT_PYDANTIC_V2))
    with pytest.raises(UnsafeRowError, match=r"antigravity\.Anything"):
        serde.loads_typed(("msgpack", blob))
    import sys

    assert "antigravity" not in sys.modules


def test_strict_mode_allowlists_widen_the_savers_own_serializer(db_dsn: str) -> None:
    """LangGraph's compile() under LANGGRAPH_STRICT_MSGPACK calls with_allowlist; the saver
    keeps its connections (a copy would have none) and allows the listed types."""
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        with pytest.raises(UnsafeRowError):
            saver.serde.loads_typed(("msgpack", opaque_blob(3)))
        widened = saver.with_allowlist({(Opaque.__module__, Opaque.__qualname__)})
        assert widened is saver
        assert saver.serde.loads_typed(("msgpack", opaque_blob(3))) == Opaque(3)


def test_a_rewritten_effect_result_is_refused_on_replay(db_dsn: str, tmp_path: Path) -> None:
    target = tmp_path / "created-by-a-journal-row"
    calls: list[int] = []
    journal_conn = psycopg.connect(db_dsn, autocommit=True, row_factory=dict_row)
    journal = EffectJournal(journal_conn)

    @effect(name="tests.safe_loading.notify", key=lambda n: f"safe-load-{n}", journal=journal)
    def notify(n: int) -> dict[str, Any]:
        calls.append(n)
        return {"sent": n}

    key_n = uuid.uuid4().int % 10**9
    assert notify(key_n) == {"sent": key_n}
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        rewritten = conn.execute(
            "UPDATE langgraph_durable_effects SET result_type = 'msgpack', result = %s "
            "WHERE key = %s",
            (evil_blob(target), f"safe-load-{key_n}"),
        ).rowcount
    assert rewritten == 1
    with pytest.raises(UnsafeRowError):
        notify(key_n)
    assert calls == [key_n]  # the receiver was not called again
    assert not target.exists()
    journal_conn.close()


def test_what_we_write_is_what_upstreams_serializer_writes() -> None:
    """Same bytes, so upstream's savers read our rows and we read theirs."""
    value = {"order": Order(order_id="1", point=Point(0, 1), color=Color.RED), "n": [1, 2]}
    assert SafeSerializer().dumps_typed(value) == JsonPlusSerializer().dumps_typed(value)


def ext(code: int, *parts: Any) -> Any:
    return ormsgpack.Ext(code, ormsgpack.packb(list(parts)))


@pytest.mark.parametrize(
    "row",
    [
        # a call hidden inside a numpy-array value, which LangGraph decodes on its own
        {
            "x": ormsgpack.Ext(
                EXT_NUMPY_ARRAY,
                ormsgpack.packb(
                    [
                        evil_ref := ext(EXT_CONSTRUCTOR_POS_ARGS, "os", "system", ["echo never"]),
                        [1],
                        "C",
                        b"",
                    ]
                ),
            )
        },
        # classes a langchain_core module merely imports: not defined there, not data
        ext(
            EXT_CONSTRUCTOR_POS_ARGS, "langchain_core.callbacks.manager", "ThreadPoolExecutor", [4]
        ),
        ext(
            EXT_CONSTRUCTOR_KW_ARGS, "langchain_core.tracers.langchain", "Client", {"api_key": "x"}
        ),
        [1, {"deep": [evil_ref]}],
    ],
    ids=["inside-numpy", "reexported-executor", "reexported-client", "nested"],
)
def test_references_hidden_anywhere_are_refused(row: Any) -> None:
    import langchain_core.callbacks.manager
    import langchain_core.tracers.langchain  # noqa: F401  (imported by any LangChain app)

    with pytest.raises(UnsafeRowError):
        SafeSerializer().loads_typed(("msgpack", ormsgpack.packb(row)))


def test_legitimate_values_upstream_loads_still_load() -> None:
    from pydantic import v1

    class Local(BaseModel):  # defined in a function: upstream loads it as its fields
        a: int

    class OldModel(v1.BaseModel):
        a: int

    globals()["OldModel"] = OldModel
    OldModel.__qualname__ = "OldModel"
    try:
        for value in [OldModel(a=1), {"local": Local(a=2)}]:
            upstream = JsonPlusSerializer(allowed_msgpack_modules=None)
            dumped = upstream.dumps_typed(value)
            assert SafeSerializer().loads_typed(dumped) == JsonPlusSerializer().loads_typed(dumped)
    finally:
        del globals()["OldModel"]
