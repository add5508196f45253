"""Idempotency keys for effects: derived from what survives a crash, or given by the user.

The default key must be the same when LangGraph runs a node again after an interrupt, an
in-process retry, or a crash (in every durability mode), and different for different
threads, loop iterations, `Send` items and separate calls in one node. It is built from:

- the thread id;
- the namespace path with task ids removed (`outer:1f..|inner:9c..` -> `outer|inner`),
  because task ids change after a crash under "async" and "exit";
- the node, the step and the task path (`langgraph_path`), which survive crashes and tell
  loop iterations and `Send` items apart;
- inside a subgraph, the node, step and path of each parent task that entered it, recorded
  by our saver as the subgraph starts (`_identity.NamespaceOrigins`): from inside, two
  `Send` items into one subgraph, or a parent loop running it again, look alike (keys of
  root-graph tasks carry nothing more);
- the effect name and the call's ordinal among calls of that effect in this execution of
  the task.

The ordinal counts per execution: LangGraph gives every execution of a task (first run,
resume after an interrupt, in-process retry) a fresh scratchpad object, and the counters
are kept per scratchpad.

Forks and time travel: re-running a thread from an earlier checkpoint is a new execution;
LangGraph saves a fork checkpoint first, so the re-run happens at a later step than the
original run's, default keys differ from the original's and effects act again. That is
what "re-run from here" means. Two forks from the same checkpoint run at the same step,
so they share default keys: the second replays the first's results (or, with other
input, raises `EffectInputMismatchError`). An effect that must never repeat (a refund, a
charge) should carry a business key (`key=`), which holds across forks, threads and time
travel alike; one that must act once per fork needs a key naming the fork.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_durable import _langgraph
from langgraph_durable._fencing import fence_token_of
from langgraph_durable._identity import (
    NAMESPACE_ORIGINS,
    CallCounts,
    FirstCallers,
    ancestor_origins,
    plain,
)
from langgraph_durable.errors import (
    EffectKeyWarning,
    EffectNameWarning,
    InvalidInputError,
    NotInEffectError,
    UnserializableValueError,
)
from langgraph_durable.serde import SafeSerializer, encrypts

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_NAME_BYTES",
    "TaskContext",
    "check_key",
    "current_effect_key",
    "current_key",
    "default_effect_name",
    "default_key",
    "input_hash",
    "next_ordinal",
    "task_context",
]

MAX_KEY_BYTES = 2048
"""Longest idempotency key, in UTF-8 bytes: the key is the journal's primary key, and a
Postgres B-tree entry holds at most 2,704 bytes."""

MAX_NAME_BYTES = 1024
"""Longest effect name: default keys are the name plus 33 characters."""


def check_key(name: str, key: object, *, what: str = "key") -> str:
    """Validate an idempotency key (or an effect name) before anything is written."""
    limit = MAX_NAME_BYTES if what == "effect name" else MAX_KEY_BYTES
    if not isinstance(key, str) or not key:
        raise InvalidInputError(f"Effect {name!r}: the {what} is {key!r}; use a non-empty string.")
    if "\x00" in key:
        raise InvalidInputError(
            f"Effect {name!r}: the {what} {key!r} contains a NUL character; remove it."
        )
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"Effect {name!r}: the {what} {key!r} is not valid text ({exc.reason} at "
            f"position {exc.start}); remove the lone surrogate."
        ) from exc
    if size > limit:
        raise InvalidInputError(
            f"Effect {name!r}: the {what} is {size:,} bytes long; at most {limit:,} UTF-8 "
            "bytes fit the journal's index. Hash long business data into the key."
        )
    return key


def _module_stem(fn: Callable[..., Any]) -> str | None:
    """The module's own name, the same whether its file runs as a script or is imported.

    `billing.payments` -> `payments`; a script run as `python payments.py` (`__main__`) ->
    `payments`; `python -m billing.payments` -> `payments`. None in an interactive session
    (a REPL or a notebook), where no file names the code.
    """
    module = getattr(fn, "__module__", None) or ""
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and getattr(spec, "name", None):
            module = spec.name
        else:
            file = getattr(main, "__file__", None)
            if not file:
                return None
            path = Path(file)
            return path.parent.name if path.stem == "__main__" else path.stem
    parts = [p for p in module.split(".") if p]
    if parts and parts[-1] == "__main__":  # python -m package
        parts.pop()
    return parts[-1] if parts else None


def default_effect_name(fn: Callable[..., Any]) -> str:
    """`<module's own name>.<qualname>`; warns when no name can be stable across runs."""
    qualname = getattr(fn, "__qualname__", None)
    stem = _module_stem(fn)
    problem = ""
    if not isinstance(qualname, str) or not qualname:
        qualname = type(fn).__name__
        problem = "it has no __qualname__ (a partial or a callable object)"
    elif "<lambda>" in qualname:
        problem = "every lambda is named <lambda>"
    elif stem is None:
        problem = (
            "it is defined in an interactive session (a REPL or a notebook), so the same "
            "code run from a file gets another name"
        )
    name = f"{stem}.{qualname}" if stem else qualname
    if problem:
        code = getattr(fn, "__code__", None)
        warnings.warn_explicit(
            f"The default name of effect {name!r} may not be stable: {problem}. The name is "
            "part of its idempotency keys; pass @effect(name=...).",
            EffectNameWarning,
            # Point at the effect's own definition, not at this package.
            filename=code.co_filename if code else "<unknown>",
            lineno=code.co_firstlineno if code else 0,
            module=getattr(fn, "__module__", None) or "<unknown>",
        )
    return name


current_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "langgraph_durable_effect_key", default=None
)


def current_effect_key() -> str:
    """The idempotency key of the effect running now, e.g. for an `Idempotency-Key` header.

    Raises:
        NotInEffectError: Called outside an effect (a `LookupError`).
    """
    key = current_key.get()
    if key is None:
        raise NotInEffectError(
            "current_effect_key() is only available inside an @effect call: call it from the "
            "function an @effect wraps, or declare its idempotency_key= parameter."
        )
    return key


@dataclass(frozen=True)
class TaskContext:
    """Where an effect is called from inside a graph."""

    thread_id: str
    namespace: str
    node: str
    step: int
    path: str
    checkpointer: Any
    scratchpad: Any
    task_id: str | None = None
    origins: tuple[Any, ...] = ()
    """Where each subgraph around the task was entered from (`_identity.ancestor_origins`)."""
    fence_token: int | None = None
    """The thread lease's fencing token the run holds (a worker's run, `exclusive`), or
    None: the journal claims an attempt only while it is still the thread's."""


def _strip_task_ids(checkpoint_ns: str) -> str:
    return "|".join(part.split(":", 1)[0] for part in checkpoint_ns.split("|") if part)


def _path_text(path: Any) -> str:
    return json.dumps(plain(path), separators=(",", ":"))


def task_context(config: RunnableConfig | None) -> TaskContext | None:
    """The graph context of the current call, or None outside a LangGraph task."""
    if not config:
        return None
    configurable: Mapping[str, Any] = config.get("configurable") or {}
    metadata: Mapping[str, Any] = config.get("metadata") or {}
    if "thread_id" not in configurable or "langgraph_node" not in metadata:
        return None
    thread_id = str(configurable["thread_id"])
    namespace = str(configurable.get("checkpoint_ns") or "")
    return TaskContext(
        thread_id=thread_id,
        namespace=_strip_task_ids(NAMESPACE_ORIGINS.normalize(thread_id, namespace)),
        origins=tuple(ancestor_origins(thread_id, namespace)),
        node=str(metadata["langgraph_node"]),
        step=int(metadata.get("langgraph_step", 0)),
        path=_path_text(metadata.get("langgraph_path", ())),
        checkpointer=_langgraph.checkpointer_of(config),
        scratchpad=_langgraph.scratchpad_of(config),
        task_id=_langgraph.task_id_of(config),
        fence_token=fence_token_of(config),
    )


# Per task execution (its scratchpad object), per effect name: calls so far, and who
# made the first.
_ORDINALS = CallCounts()
_FIRST_CALLERS = FirstCallers()


def next_ordinal(context: TaskContext, name: str) -> int:
    """The ordinal of this call of effect `name` in the current task execution.

    Ordinals follow the order of the calls, which is the code's order, except for calls
    made at once from several threads or asyncio tasks of one node (a `ToolNode` running
    a model message's tool calls): their order, and so their keys, may differ on a resume,
    and one call replay another's result. That is warned about (`EffectKeyWarning`), once
    per call site: the calls need `key=`."""
    if context.scratchpad is None:
        raise InvalidInputError(
            f"effect {name!r} cannot derive a key here (no LangGraph task scratchpad); pass key=."
        )
    if _FIRST_CALLERS.another(context.scratchpad, name, _caller_identity()):
        warnings.warn(
            f"effect {name!r} is called with default keys from several threads or asyncio "
            "tasks of one node (parallel tool calls, say): its calls are numbered in the "
            "order they arrive, which may differ when the node runs again, so a resume "
            "could give one call another's key. Pass key= (in a tool: the thread and the "
            "tool call's id).",
            EffectKeyWarning,
            stacklevel=5,
        )
    return _ORDINALS.next(context.scratchpad, name)


def _caller_identity() -> tuple[int, int | None]:
    """The calling thread, and the asyncio task running in it, if any."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop in this thread
        task = None
    return threading.get_ident(), None if task is None else id(task)


def default_key(context: TaskContext, name: str, ordinal: int) -> str:
    """The default key: readable effect name, then a hash of where the call happens."""
    where: list[Any] = [
        context.thread_id,
        context.namespace,
        context.node,
        context.step,
        context.path,
        name,
        ordinal,
    ]
    if any(o is not None for o in context.origins):
        # Inside a subgraph that our saver saw entered. A root task's key, or one where
        # no entry was recorded (another checkpointer), is what it always was.
        where.append(list(context.origins))
    material = json.dumps(where, separators=(",", ":"))
    return f"{name}:{hashlib.sha256(material.encode()).hexdigest()[:32]}"


_HASHING = SafeSerializer()
"""What hashes the arguments when the journal's serializer encrypts: encryption takes a
new nonce every time, so its bytes differ for the same arguments."""


def _canonical(value: Any, serde: SerializerProtocol) -> Any:
    """`value` with every set whose iteration order depends on the interpreter's hash
    seed (strings, bytes, tuples of them, None...) as a list sorted by each element's
    bytes: another process iterates such a set in another order. Sets of numbers, and
    sets of one element, iterate alike in every process and are kept, so their hashes
    stay what they were."""
    kind = type(value)
    if kind is set or kind is frozenset:
        if len(value) <= 1 or all(isinstance(v, (int, float)) for v in value):
            return value
        items = [_canonical(v, serde) for v in value]
        return sorted(items, key=lambda v: serde.dumps_typed(v)[1])
    if kind is dict:
        found = {k: _canonical(v, serde) for k, v in value.items()}
        changed = any(found[k] is not v for k, v in value.items())
    elif kind is list or kind is tuple:
        found = kind(_canonical(v, serde) for v in value)
        changed = any(a is not b for a, b in zip(found, value, strict=True))
    else:
        return value  # anything else is serialized as it is
    return found if changed else value  # unchanged: the very same bytes as before


def input_hash(serde: SerializerProtocol, name: str, arguments: Mapping[str, Any]) -> str:
    """A stable hash of an effect's arguments, so a key reused with other input is caught:
    the same in every process for the same arguments. With an encrypting serializer the
    hash is of the arguments as `SafeSerializer` writes them, and the journal stores it
    encrypted (`seal_text`): a plain hash of a low-entropy input would confirm guesses."""
    hashing = _HASHING if encrypts(serde) else serde
    try:
        type_, data = hashing.dumps_typed(_canonical(dict(arguments), hashing))
    except Exception as exc:
        raise UnserializableValueError(
            f"The arguments of effect {name!r} cannot be serialized to check replays ({exc}). "
            "Pass plain data (str, numbers, dicts, pydantic models) to effects."
        ) from exc
    return hashlib.sha256(type_.encode() + b"\x00" + data).hexdigest()[:32]
