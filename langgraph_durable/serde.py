"""Safe loading: no stored row makes this process construct a class it did not agree to.

LangGraph's msgpack format stores a custom value as "module, name, arguments", and its
serializer imports that module and calls that name on load. Whoever can write the
checkpoint or journal tables could therefore make a reader call `builtins.open` or
`os.system` with arguments of their choosing. Our savers (and the effect journal) load
through `SafeSerializer` instead, which reads every such reference in a value *before*
anything is imported or called, and refuses the whole value (`UnsafeRowError`) unless
each one is allowed:

- the types LangGraph itself always allows (`SAFE_MSGPACK_TYPES`: datetimes, UUIDs,
  decimals, sets, langchain-core messages, ...);
- types and modules registered with `SafeSerializer(allow=...)` or passed by LangGraph's
  own `with_allowlist` (what `compile()` derives from the state schema under
  `LANGGRAPH_STRICT_MSGPACK=true`);
- data classes of modules this process has already imported: pydantic models (v1 and v2),
  dataclasses, enums and named tuples, defined in that module under that name (not merely
  imported there). Their constructors validate fields; they do not run commands or open
  connections. A module that is not imported yet is never imported on behalf of a row:
  register its types instead. A name the module does not have is loaded as its stored
  fields, as upstream does.

Under LangGraph's strict mode (`LANGGRAPH_STRICT_MSGPACK=true`, read by LangGraph when it is
imported) the user asked for a narrower allow-list, and the third kind is not built: such a
data class loads as upstream's strict serializer loads it, as its stored fields (a model,
dataclass or named tuple as a dict, an enum as its value), with LangGraph's "Blocked
deserialization" warning in its log. What the first two kinds allow is built in both
modes, and what our default refuses (a function, a class that is not a data class, a
module not imported) is refused in both. `SafeSerializer(strict=...)` chooses the mode
explicitly; a `JsonPlusSerializer` given to the saver keeps the mode it was made in.

Every reference is checked, at any depth and inside any kind of custom value, and LangGraph
then builds the value with an allow-list of exactly what was checked. A custom value that
holds no other (a message, whose fields are plain data) names one class: LangGraph's
builder asks our rules about it before importing or calling anything, in the one decoding
that builds it (`holds_no_other`), instead of a decoding to check and another to build.

With encryption (`EncryptedSerializer`), a row without a cipher suffix is refused too,
since anyone could have written it; `allow_plaintext=True` reads such rows while a
database written before encryption was turned on is being migrated.

Threat model: someone who can write our tables can change or delete the data (that is
what write access means) but cannot make the reader run code or touch files. A serializer
that is neither LangGraph's `JsonPlusSerializer` nor its `EncryptedSerializer` is used as
given: a custom serializer is its author's to make safe.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import sys
from collections.abc import Iterable
from typing import Any, cast

import ormsgpack
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from langgraph_durable import _langgraph
from langgraph_durable.errors import UnsafeRowError

__all__ = [
    "STORED_CLASS",
    "DescribingSerializer",
    "SafeEncryptedSerializer",
    "SafeSerializer",
    "clip_text",
    "describing",
    "encrypts",
    "make_safe",
    "open_text",
    "seal_text",
    "unsealed",
]

Allowed = Iterable[type | str | tuple[str, str]]


def _keys(allow: Allowed) -> frozenset[tuple[str, ...]]:
    """("module", "Name") for a type or a pair, ("module",) for a whole module."""
    keys: set[tuple[str, ...]] = set()
    for item in allow:
        if isinstance(item, type):
            keys.add((item.__module__, item.__name__))
            keys.add((item.__module__, item.__qualname__))
        elif isinstance(item, str):
            keys.add((item,))
        else:
            keys.add(tuple(item))
    return frozenset(keys)


def _is_data_class(found: type) -> bool:
    """A class whose construction only validates and stores fields."""
    if issubclass(found, (BaseModel, enum.Enum)) or dataclasses.is_dataclass(found):
        return True
    if issubclass(found, tuple) and hasattr(found, "_fields"):
        return True
    v1 = sys.modules.get("pydantic.v1")
    return v1 is not None and issubclass(found, v1.BaseModel)


def _verdict(
    module: str, name: str, allowed: frozenset[tuple[str, ...]], strict: bool
) -> bool | None:
    """True: may be built. False: refused. None: loaded unbuilt, as its stored fields (what
    LangGraph returns for a class it does not build): there is no such class in an
    imported module (as upstream does for a class it cannot find), or, under strict mode,
    it is a data class that is not listed (as upstream's strict mode does)."""
    try:
        if (module, name) in _langgraph.SAFE_MSGPACK_TYPES or (module, name) in allowed:
            return True
        if (module,) in allowed:
            return True
        loaded = sys.modules.get(module)
        if loaded is None:
            return False  # never import a module on behalf of a row
        # Only what the module holds: `getattr` would run a module's `__getattr__`, which
        # in some packages imports submodules on first use (on behalf of the row).
        namespace = getattr(loaded, "__dict__", None)
        found = namespace.get(name) if isinstance(namespace, dict) else None
        if found is None:
            return None
        # The class must be defined where the row says, not merely imported there, and
        # must be a data class: constructing it cannot run commands or open connections.
        if not (
            isinstance(found, type)
            and found.__module__ == module
            and found.__name__ == name
            and _is_data_class(found)
        ):
            return False
        # Strict mode builds only what is listed: a data class loads as its fields.
        return None if strict else True
    except Exception:  # an odd class or module that fails to answer: refused, not built
        return False


def _numpy_allowed(allowed: frozenset[tuple[str, ...]]) -> bool:
    """Whether a numpy array may be built: LangGraph's builder imports numpy to build one,
    so only once the process has imported it, or it is registered."""
    return "numpy" in sys.modules or not allowed.isdisjoint({("numpy",), ("numpy", "ndarray")})


def check_references(
    code: int, payload: bytes, allowed: frozenset[tuple[str, ...]], *, strict: bool
) -> tuple[list[str], set[tuple[str, ...]]]:
    """Every class or method reference in one msgpack ext value, nested ones included
    (inside any ext code): (the refused ones as "module.name", the ones that may be
    built). Nothing is imported or called."""
    refused: list[str] = []
    buildable: set[tuple[str, ...]] = set()

    def scan(code: int, payload: bytes) -> None:
        if code == _langgraph.MSGPACK_NUMPY_CODE and not _numpy_allowed(allowed):
            refused.append("numpy.ndarray")
        try:
            parts = ormsgpack.unpackb(payload, ext_hook=scan, option=ormsgpack.OPT_NON_STR_KEYS)
        except (ValueError, TypeError):
            return None  # not msgpack inside (e.g. raw bytes): nothing to build from
        if code not in _langgraph.MSGPACK_REFERENCE_CODES:
            return None
        if not isinstance(parts, (list, tuple)) or len(parts) < 2:
            return None
        module, name = str(parts[0]), str(parts[1])
        if code == _langgraph.MSGPACK_METHOD_CODE:
            method = str(parts[3]) if len(parts) > 3 else ""
            if (module, name, method) not in _langgraph.SAFE_MSGPACK_METHODS:
                refused.append(f"{module}.{name}.{method}")
            return None
        verdict = _verdict(module, name, allowed, strict)
        if verdict is False:
            refused.append(f"{module}.{name}")
        elif verdict:
            buildable.add((module, name))
        return None

    scan(code, payload)
    return refused, buildable


_EXT_BYTES = bytes([0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8])
"""The msgpack type bytes that start a custom (ext) value: ext 8/16/32 and fixext 1-16. A
payload in which none of these bytes occurs anywhere holds no custom value inside it (one
that does may still hold none: the bytes also occur in text, numbers and binary data)."""

_CONSTRUCTOR_CODES = _langgraph.MSGPACK_REFERENCE_CODES - {_langgraph.MSGPACK_METHOD_CODE}


def holds_no_other(code: int, payload: bytes) -> bool:
    """Whether a custom value is a constructor call holding no other custom value: then it
    names one class, and LangGraph's builder asks about that class before it imports or
    calls anything (`_Verdicts`), so it needs no decoding of its own to be checked.

    Most stored custom values are messages whose fields are plain data. Decoding each one
    to find its references and then again to build it made loading a 400-message chat
    1.33x as slow as LangGraph's own load. Text in Arabic, Hebrew or Armenian script holds
    such bytes throughout (UTF-8 lead bytes d4-d8): the first 128 bytes, where a message's
    text starts, tell those apart at once, so that they go to the full check without a
    pass over the rest. (A reference whose module or name is not text reaches LangGraph's
    fallback before its check, and loads as its stored fields: nothing is built; such a
    row was written by hand.)"""
    if code not in _CONSTRUCTOR_CODES or not payload:
        return False
    # Deleting the bytes copies the payload, in C: a regular expression's search for them
    # took six times as long.
    head = payload[:128]
    if len(head.translate(None, _EXT_BYTES)) != len(head):
        return False
    return len(payload) <= 128 or len(payload.translate(None, _EXT_BYTES)) == len(payload)


class _Verdicts:
    """The allow-list LangGraph's builder consults for one load: for each class it would
    build beyond its own safe types, `_verdict`, and a refusal is recorded for the load to
    raise once decoding ends (LangGraph then returns the stored fields, building nothing)."""

    def __init__(
        self, allowed: frozenset[tuple[str, ...]], refused: list[str], strict: bool
    ) -> None:
        self.allowed = allowed
        self.refused = refused
        self.strict = strict

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        module, name = str(key[0]), str(key[1])
        verdict = _verdict(module, name, self.allowed, self.strict)
        if verdict is False:
            self.refused.append(f"{module}.{name}")
        return bool(verdict)


class SafeSerializer(JsonPlusSerializer):
    """LangGraph's `JsonPlusSerializer`, checking every stored class reference first.

    Writes the same bytes as `JsonPlusSerializer`, so upstream's savers read our rows
    and we read theirs.

    Args:
        allow: Types, ("module", "Name") pairs or whole module names whose classes may be
            constructed on load, beyond those allowed without asking (see the module
            docstring).
        allowed_msgpack_modules: LangGraph's own spelling of `allow` (what its log's
            "Add to allowed_msgpack_modules" advice names): a list of types or pairs
            counts as allowed too.
        strict: Build only LangGraph's safe types and what is allowed (`allow`, and what
            `compile()` passes for the graph's state types); other data classes load as
            their stored fields, as upstream's strict mode loads them. None (default):
            LangGraph's strict mode, `LANGGRAPH_STRICT_MSGPACK`.
    """

    def __init__(self, *, allow: Allowed = (), strict: bool | None = None, **kwargs: Any) -> None:
        listed = kwargs.get("allowed_msgpack_modules")
        if isinstance(listed, (list, tuple, set, frozenset)):
            allow = [*allow, *listed]
        kwargs["allowed_msgpack_modules"] = True  # the check is ours, first
        super().__init__(**kwargs)
        self.allowed = _keys(allow)
        self.strict = _langgraph.strict_msgpack() if strict is None else strict

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if data[0] != "msgpack":
            return super().loads_typed(data)
        # JsonPlusSerializer's msgpack load, with every custom value checked before it is
        # built (a value without custom types costs nothing extra). A refused one is not
        # built; the whole value is refused once decoding ends.
        refused: list[str] = []
        plain: Any = None  # the builder for values that hold no other, made when needed

        def build(code: int, payload: bytes) -> Any:
            nonlocal plain
            if holds_no_other(code, payload):
                if plain is None:
                    plain = _langgraph.checking_ext_hook(
                        _Verdicts(self.allowed, refused, self.strict)
                    )
                return plain(code, payload)
            found, buildable = check_references(code, payload, self.allowed, strict=self.strict)
            if found:
                refused.extend(found)
                return None
            # LangGraph builds it with an allow-list of exactly what was checked, so a
            # nested value it decodes on its own cannot build anything else either.
            return _langgraph.strict_ext_hook(frozenset(buildable))(code, payload)

        value = ormsgpack.unpackb(data[1], ext_hook=build, option=ormsgpack.OPT_NON_STR_KEYS)
        if refused:
            raise UnsafeRowError(
                f"A stored value names {', '.join(sorted(set(refused)))}, which is not on "
                "the allow-list, so it was not loaded and nothing was constructed. If it is "
                "your own type, import its module before loading, or register it: "
                "SafeSerializer(allow=[YourType]) passed as the saver's serde. If you did "
                "not store it, someone wrote to the table."
            )
        return value

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> SafeSerializer:
        """A copy that also allows `extra_allowlist` (LangGraph's `with_allowlist`)."""
        clone = _langgraph.copy_serializer(self)
        clone.allowed = self.allowed | _keys(extra_allowlist)
        return clone


STORED_CLASS = "__class__"
"""The key under which `DescribingSerializer` names the class of a value it did not build."""


class DescribingSerializer(SafeSerializer):
    """For showing stored values to an operator without the application's code.

    `SafeSerializer` refuses a whole value that names a class it may not build, so the
    CLI's `threads show` or the console's timeline, which run without the application's
    modules, could not show a thread whose state holds the application's own types. This
    one builds what `SafeSerializer` would, and shows every other custom value as its
    stored fields under `STORED_CLASS` (``{"__class__": "myapp.Deal", "amount": 3}``):
    nothing is imported or called on behalf of the row, as before.

    Only for reading: a value loaded here is not the value that was stored, so nothing
    loaded with it may be written back or acted on.
    """

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if data[0] != "msgpack":
            return super().loads_typed(data)

        def build(code: int, payload: bytes) -> Any:
            refused, buildable = check_references(code, payload, self.allowed, strict=self.strict)
            if not refused:
                return _langgraph.strict_ext_hook(frozenset(buildable))(code, payload)
            return _described(code, payload, build)

        return ormsgpack.unpackb(data[1], ext_hook=build, option=ormsgpack.OPT_NON_STR_KEYS)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> DescribingSerializer:
        clone = _langgraph.copy_serializer(self)
        clone.allowed = self.allowed | _keys(extra_allowlist)
        return clone


def _described(code: int, payload: bytes, build: Any) -> Any:
    """A custom value that may not be built, as plain data: its stored fields (custom
    values inside them built or described by `build`) under its class's name."""
    try:
        parts = ormsgpack.unpackb(payload, ext_hook=build, option=ormsgpack.OPT_NON_STR_KEYS)
    except (ValueError, TypeError):
        return {STORED_CLASS: "(a custom value that cannot be decoded)"}
    if code == _langgraph.MSGPACK_NUMPY_CODE and isinstance(parts, (list, tuple)):
        return {STORED_CLASS: "numpy.ndarray", "dtype": parts[0], "shape": parts[1]}
    if code not in _langgraph.MSGPACK_REFERENCE_CODES:
        return parts  # a wrapper (a delta channel's snapshot): the value it holds
    if not isinstance(parts, (list, tuple)) or len(parts) < 2:
        return {STORED_CLASS: "(a custom value that cannot be decoded)"}
    name = f"{parts[0]}.{parts[1]}"
    if code == _langgraph.MSGPACK_METHOD_CODE and len(parts) > 3:
        name = f"{name}.{parts[3]}"
    fields = parts[2] if len(parts) > 2 else None
    if isinstance(fields, dict):
        return {STORED_CLASS: name, **{str(k): v for k, v in fields.items()}}
    return {STORED_CLASS: name, "value": fields}


def describing(serde: SerializerProtocol) -> SerializerProtocol:
    """The twin of a saver's serializer for showing values (`DescribingSerializer`): same
    allow-list and cipher. A serializer that is not ours is returned as given."""
    if isinstance(serde, DescribingSerializer):
        return serde
    if isinstance(serde, SafeSerializer):
        twin = DescribingSerializer(strict=serde.strict)
        twin.allowed = serde.allowed
        return twin
    if isinstance(serde, SafeEncryptedSerializer):
        return SafeEncryptedSerializer(
            serde.cipher, describing(serde.serde), allow_plaintext=serde.allow_plaintext
        )
    return serde


class SafeEncryptedSerializer(EncryptedSerializer):
    """LangGraph's `EncryptedSerializer` that refuses rows stored without a cipher.

    Args:
        cipher: The cipher, as for `EncryptedSerializer`.
        serde: The inner serializer; made safe if it is LangGraph's.
        allow_plaintext: Read rows without a cipher suffix (written before encryption was
            turned on). Turn it off again once every thread has been rewritten.
    """

    def __init__(
        self,
        cipher: CipherProtocol,
        serde: SerializerProtocol | None = None,
        *,
        allow_plaintext: bool = False,
    ) -> None:
        super().__init__(cipher, SafeSerializer() if serde is None else make_safe(serde))
        self.allow_plaintext = allow_plaintext

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if "+" not in data[0] and data[0] != "null" and not self.allow_plaintext:
            raise UnsafeRowError(
                f"A stored value of type {data[0]!r} carries no cipher although the saver "
                "encrypts, so it was not loaded: anyone with write access could have put it "
                "there. If the database holds rows from before encryption was turned on, "
                "pass SafeEncryptedSerializer(cipher, allow_plaintext=True) while you migrate."
            )
        return super().loads_typed(data)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> SafeEncryptedSerializer:
        inner = self.serde
        if isinstance(inner, JsonPlusSerializer):
            inner = inner.with_msgpack_allowlist(extra_allowlist)
        return SafeEncryptedSerializer(self.cipher, inner, allow_plaintext=self.allow_plaintext)


def make_safe(serde: SerializerProtocol | None) -> SerializerProtocol:
    """The serializer our savers and the journal load with, for the one they were given.

    LangGraph's own serializers are replaced by their safe equivalents (same bytes
    written, same settings); ours and anyone else's are returned as given, and so is a
    `JsonPlusSerializer` made with `pickle_fallback=True` or `allowed_json_modules=True`:
    those load whatever a row says, by the user's explicit choice.
    """
    if serde is None:
        return SafeSerializer()
    if isinstance(serde, (SafeSerializer, SafeEncryptedSerializer)):
        return serde
    if type(serde) is JsonPlusSerializer:
        if _langgraph.loads_anything(serde):
            return serde  # pickle rows or any lc module, explicitly asked for: as given
        return _langgraph.as_safe_serializer(serde, SafeSerializer)
    if type(serde) is EncryptedSerializer:
        return SafeEncryptedSerializer(serde.cipher, serde.serde)
    return serde


SEALED_PREFIX = "lgd-sealed:v1:"
"""How a text column (an effect's or a run's error message) starts when the saver's
serializer encrypted it: the prefix, the serializer's type tag, ":", base64 of the bytes."""


def encrypts(serde: SerializerProtocol | None) -> bool:
    """Whether `serde` encrypts what it stores (LangGraph's `EncryptedSerializer`).

    Asked on every put. `EncryptedSerializer` derives from a `Protocol`, whose `isinstance`
    costs more than a microsecond, so the default serializers (exactly these classes, which
    never encrypt) are answered first; anything else (a subclass, a proxy, a class
    registered with `EncryptedSerializer.register`) gets `isinstance`'s answer."""
    if type(serde) in _NEVER_ENCRYPT:
        return False
    return isinstance(serde, EncryptedSerializer)


_NEVER_ENCRYPT = frozenset({SafeSerializer, JsonPlusSerializer, type(None)})


def unsealed(serde: SerializerProtocol, data: tuple[str, bytes]) -> tuple[str, bytes]:
    """A stored value's type and bytes as they were before `serde` encrypted them: for a
    fingerprint of the value, which must not change with each write's new nonce. As
    stored when `serde` does not encrypt, or the row carries no cipher."""
    kind, blob = data
    if not encrypts(serde) or "+" not in kind:
        return data
    inner, cipher_name = kind.split("+", 1)
    cipher = cast(EncryptedSerializer, serde).cipher
    return inner, cipher.decrypt(cipher_name, blob)


def seal_text(serde: SerializerProtocol | None, text: str | None) -> str | None:
    """`text` as a text column stores it: encrypted when `serde` encrypts, else as it is.

    Error messages often quote what failed (an amount, an address, a token in a URL), so
    with encryption on they are kept no clearer than the values themselves.
    """
    if text is None or serde is None or not encrypts(serde):
        return text
    kind, data = serde.dumps_typed(text)
    return f"{SEALED_PREFIX}{kind}:{base64.b64encode(data).decode('ascii')}"


def open_text(serde: SerializerProtocol | None, stored: str | None) -> str | None:
    """A text column's value as written before `seal_text`: decrypted when sealed. One
    that cannot be opened (another key) reads as a note saying so, not as an error: it is
    only ever shown, never acted on."""
    if stored is None or not stored.startswith(SEALED_PREFIX) or serde is None:
        return stored
    kind, _, data = stored[len(SEALED_PREFIX) :].partition(":")
    try:
        found = serde.loads_typed((kind, base64.b64decode(data)))
    except Exception:  # another key, a damaged value: shown, never acted on
        return "(encrypted text that this serializer cannot decrypt)"
    return found if isinstance(found, str) else str(found)


def clip_text(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters, unless it is sealed (cutting would break it; it
    was cut before it was sealed)."""
    if text is None or text.startswith(SEALED_PREFIX):
        return text
    return text[:limit]
