"""The public surface of both savers against upstream's, compared name by name.

Whatever a program does with `PostgresSaver` / `AsyncPostgresSaver` must work with ours,
spelled the same way: every public name exists, is sync or async the same way, accepts
every argument upstream's accepts (by position where upstream's takes positions, with the
same defaults), and returns the same kind of thing. The few differences we keep are listed
in `DELIBERATE` with their reasons; anything else fails, so that the next upstream release
shows its differences here, in CI.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_durable import AsyncDurablePostgresSaver, DurablePostgresSaver

PAIRS = [
    pytest.param(PostgresSaver, DurablePostgresSaver, id="sync"),
    pytest.param(AsyncPostgresSaver, AsyncDurablePostgresSaver, id="async"),
]

DELIBERATE: dict[str, str] = {
    # Upstream's SQL text as class attributes: its statements, not a call shape. Ours live
    # in langgraph_durable/_sql/, one statement per operation.
    "MIGRATIONS": "upstream's migration SQL; ours is langgraph_durable._sql.MIGRATIONS",
    "SELECT_SQL": "upstream's statement text",
    "SELECT_PENDING_SENDS_SQL": "upstream's statement text",
    "UPSERT_CHECKPOINT_BLOBS_SQL": "upstream's statement text",
    "UPSERT_CHECKPOINTS_SQL": "upstream's statement text",
    "UPSERT_CHECKPOINT_WRITES_SQL": "upstream's statement text",
    "INSERT_CHECKPOINT_WRITES_SQL": "upstream's statement text",
    "setup -> return": "returns the names of the migrations it applied (upstream: None)",
}

RENAMES = {
    r"\bAsyncPostgresSaver\b": "AsyncDurablePostgresSaver",
    r"\bPostgresSaver\b": "DurablePostgresSaver",
    r"\bbuiltins\.list\b": "list",
    r"\b_internal\.Conn\b": "Conn",
    r"\b_ainternal\.Conn\b": "AsyncConn",
    r"\bBaseCheckpointSaver\[V\]": "BaseCheckpointSaver[str]",  # our savers store str versions
}


def public_names(cls: type) -> list[str]:
    return sorted(name for name in dir(cls) if not name.startswith("_"))


def kind_of(cls: type, name: str) -> str:
    """How a name is called: attribute, plain/coroutine/async-generator function, context
    manager (sync or async), and whether it is a classmethod or staticmethod."""
    static = inspect.getattr_static(cls, name)
    wrapper = ""
    if isinstance(static, classmethod):
        wrapper, static = "classmethod ", static.__func__
    elif isinstance(static, staticmethod):
        wrapper, static = "staticmethod ", static.__func__
    elif isinstance(static, property):
        return "property"
    if not callable(static):
        return "attribute"
    inner = inspect.unwrap(static)
    if inner is not static and inspect.isasyncgenfunction(inner):
        return wrapper + "async context manager"
    if inner is not static and inspect.isgeneratorfunction(inner):
        return wrapper + "context manager"
    if inspect.iscoroutinefunction(static):
        return wrapper + "coroutine function"
    if inspect.isasyncgenfunction(static):
        return wrapper + "async generator function"
    if inspect.isgeneratorfunction(static):
        return wrapper + "generator function"
    return wrapper + "function"


def normalized(annotation: Any) -> str:
    """An annotation with upstream's names spelled as ours."""
    text = str(annotation)
    for old, new in RENAMES.items():
        text = re.sub(old, new, text)
    return text


def call_shape_problems(
    name: str, theirs: Callable[..., Any], ours: Callable[..., Any]
) -> list[str]:
    """Ways a call written for upstream's callable could fail or differ with ours."""
    problems: list[str] = []
    up = inspect.signature(theirs)
    our = inspect.signature(ours)
    our_params = list(our.parameters.values())
    positional = [
        p.name for p in our_params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    for index, param in enumerate(up.parameters.values()):
        mine = our.parameters.get(param.name)
        if mine is None:
            problems.append(f"{name}: no parameter {param.name!r}")
            continue
        by_position = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
        if by_position and (index >= len(positional) or positional[index] != param.name):
            problems.append(f"{name}: {param.name!r} is not positional at {index}")
        by_keyword = param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD)
        if by_keyword and mine.kind not in (mine.KEYWORD_ONLY, mine.POSITIONAL_OR_KEYWORD):
            problems.append(f"{name}: {param.name!r} cannot be passed by keyword")
        if param.default is not param.empty and mine.default != param.default:
            problems.append(
                f"{name}: default of {param.name!r} is {mine.default!r}, not {param.default!r}"
            )
    for mine in our_params:
        if (
            mine.name not in up.parameters
            and mine.default is mine.empty
            and mine.kind
            not in (
                mine.VAR_POSITIONAL,
                mine.VAR_KEYWORD,
            )
        ):
            problems.append(f"{name}: our parameter {mine.name!r} is required")
    same_return = normalized(up.return_annotation) == str(our.return_annotation)
    if not same_return and f"{name} -> return" not in DELIBERATE:
        problems.append(f"{name}: returns {our.return_annotation}, upstream {up.return_annotation}")
    return problems


@pytest.mark.parametrize(("upstream", "ours"), PAIRS)
def test_every_public_name_of_upstream_is_ours_too_and_called_the_same_way(
    upstream: type, ours: type
) -> None:
    problems: list[str] = []
    for name in public_names(upstream):
        if name in DELIBERATE:
            continue
        if not hasattr(ours, name):
            problems.append(f"missing: {name} ({kind_of(upstream, name)})")
            continue
        theirs_kind, ours_kind = kind_of(upstream, name), kind_of(ours, name)
        if theirs_kind != ours_kind:
            problems.append(f"{name}: upstream's is a {theirs_kind}, ours a {ours_kind}")
            continue
        if "function" in theirs_kind or "context manager" in theirs_kind:
            problems += call_shape_problems(name, getattr(upstream, name), getattr(ours, name))
    problems += call_shape_problems("__init__", upstream.__init__, ours.__init__)
    assert not problems, "\n".join(problems)


def test_the_deliberate_differences_still_exist_upstream() -> None:
    """A difference upstream no longer has must leave the list (it would hide nothing)."""
    for name in DELIBERATE:
        attribute = name.split(" -> ")[0]
        assert hasattr(PostgresSaver, attribute), f"upstream no longer has {attribute}"


def instance_attributes(saver: object) -> set[str]:
    return {name for name in vars(saver) if not name.startswith("_")}


def test_sync_instances_carry_upstream_attributes() -> None:
    pool: ConnectionPool[Any] = ConnectionPool("postgresql://unused", open=False)
    missing = instance_attributes(PostgresSaver(pool)) - instance_attributes(
        DurablePostgresSaver(pool)
    )
    assert not missing


async def test_async_instances_carry_upstream_attributes() -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool("postgresql://unused", open=False)
    missing = instance_attributes(AsyncPostgresSaver(pool)) - instance_attributes(
        AsyncDurablePostgresSaver(pool)
    )
    assert not missing


def test_async_setup_is_awaited_like_upstreams() -> None:
    assert inspect.iscoroutinefunction(AsyncPostgresSaver.setup)
    assert inspect.iscoroutinefunction(AsyncDurablePostgresSaver.setup)
    assert inspect.iscoroutinefunction(AsyncDurablePostgresSaver.asetup)
    assert not inspect.iscoroutinefunction(DurablePostgresSaver.setup)
