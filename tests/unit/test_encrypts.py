"""`serde.encrypts`: it decides whether values stay readable in a checkpoint's JSON and
whether error texts and configs are sealed, so every encrypting serializer must be seen as
one, however it is passed."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.checkpoint import _core
from langgraph_durable.serde import SafeEncryptedSerializer, SafeSerializer, encrypts


class _Cipher:
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "rot", plaintext[::-1]

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return ciphertext[::-1]


class _Proxy:
    """Forwards everything, `__class__` included, as wrapt's ObjectProxy does."""

    def __init__(self, wrapped: Any) -> None:
        object.__setattr__(self, "_wrapped", wrapped)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(object.__getattribute__(self, "_wrapped"))

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_wrapped"), name)


class _Registered:
    """A serializer of its own, declared an EncryptedSerializer by registration."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "x", b""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return None


def test_the_default_serializers_do_not_encrypt() -> None:
    assert not encrypts(SafeSerializer())
    assert not encrypts(JsonPlusSerializer())
    assert not encrypts(None)


def test_every_encrypting_serializer_is_seen_as_one() -> None:
    encrypting = SafeEncryptedSerializer(_Cipher())
    assert encrypts(encrypting)
    assert encrypts(EncryptedSerializer(_Cipher()))
    assert encrypts(_Proxy(encrypting))
    assert encrypts(Mock(spec=SafeEncryptedSerializer))
    assert not encrypts(_Registered())
    EncryptedSerializer.register(_Registered)
    assert encrypts(_Registered())


def test_a_proxied_encrypting_serializer_keeps_text_out_of_the_checkpoint() -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"secret": "plain text"}
    serde = _Proxy(SafeEncryptedSerializer(_Cipher()))
    row, blobs = _core.checkpoint_row(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        checkpoint,
        {},
        inline_values=not encrypts(serde),
    )
    assert set(blobs) == {"secret"}
    assert "plain text" not in row["checkpoint"]
