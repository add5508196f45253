"""Preparing an effect call: the arguments its input hash covers, and its lease token.

Both run on every `@effect` call, so each has a fast path; these tests pin the fast paths
to what the general ones give.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_durable import effect
from langgraph_durable.effects import _call
from langgraph_durable.effects._call import next_call_token
from langgraph_durable.effects._effect import EffectSpec
from langgraph_durable.effects._keys import input_hash
from langgraph_durable.effects._memory import MemoryEffectJournal
from langgraph_durable.errors import InvalidInputError
from langgraph_durable.serde import SafeSerializer


def spec_of(fn: Callable[..., Any]) -> EffectSpec:
    wrapped = effect(fn, key="k", journal=MemoryEffectJournal(), name="prep")
    found = wrapped.__effect__  # type: ignore[attr-defined]
    assert isinstance(found, EffectSpec)
    return found


def bound(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What binding the call gives, defaults filled in, without the key parameter."""
    found = inspect.signature(fn).bind_partial(*args, **kwargs)
    found.apply_defaults()
    return {k: v for k, v in found.arguments.items() if k != "idempotency_key"}


def two(a: int, b: int = 2) -> None: ...


def with_key(a: int, idempotency_key: str = "") -> None: ...


def positional_only(a: int, /, b: int) -> None: ...


def star(a: int, *rest: int) -> None: ...


def keyword_only(a: int, *, b: int = 1) -> None: ...


def nothing() -> None: ...


class Mailer:
    def send(self, to: str, body: str = "hi") -> None: ...


CALLS: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (two, (1, 3), {}),  # every parameter by position: the fast path
    (two, (1,), {}),  # a default left out
    (two, (), {"a": 1, "b": 3}),  # by keyword
    (two, (1,), {"b": 3}),
    (with_key, (1, "key-given-by-position"), {}),
    (with_key, (1,), {"idempotency_key": "k"}),
    (positional_only, (1, 2), {}),
    (star, (1, 2), {}),  # as many values as names, one of them `*rest`
    (star, (1, 2, 3), {}),
    (star, (1,), {}),
    (keyword_only, (1,), {}),
    (keyword_only, (1,), {"b": 5}),
    (nothing, (), {}),
    (Mailer().send, ("a@b", "text"), {}),
    (Mailer().send, ("a@b",), {}),
]


@pytest.mark.parametrize(("fn", "args", "kwargs"), CALLS)
def test_the_arguments_are_those_binding_gives(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    found = spec_of(fn).arguments(args, kwargs)
    expected = bound(fn, args, kwargs)
    assert found == expected
    assert list(found) == list(expected)  # the order too: the hash serializes the dict


def test_a_call_by_position_and_by_keyword_cover_the_same_arguments() -> None:
    spec = spec_of(two)
    assert spec.arguments((1, 3), {}) == spec.arguments((), {"b": 3, "a": 1}) == {"a": 1, "b": 3}


def test_a_call_that_does_not_fit_the_signature_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="prep"):
        spec_of(two).arguments((1, 2, 3), {})
    with pytest.raises(InvalidInputError, match="prep"):
        spec_of(two).arguments((1,), {"c": 2})


@pytest.mark.parametrize(
    ("fn", "args", "kwargs"),
    [(two, (), {}), (two, (), {"b": 3}), (with_key, (), {}), (positional_only, (1,), {})],
)
def test_a_call_missing_a_required_argument_is_refused_before_any_claim(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """The body's own TypeError would come after the claim: journaled as the effect's
    failure, it would keep the key failed, and the corrected call would be refused."""
    with pytest.raises(InvalidInputError, match="missing required argument"):
        spec_of(fn).arguments(args, kwargs)


def test_the_key_parameter_may_be_left_to_the_runner() -> None:
    assert spec_of(with_key).arguments((1,), {}) == {"a": 1}


def _hash_in_a_process(seed: str, arguments: str) -> str:
    code = (
        "from langgraph_durable.effects._keys import input_hash;"
        "from langgraph_durable.serde import SafeSerializer;"
        f"print(input_hash(SafeSerializer(), 'tag', {arguments}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_input_hash_of_a_set_is_the_same_in_every_process() -> None:
    """A set of strings iterates in an order set by the interpreter's hash seed: another
    process (a resume) would see other input and refuse the replay."""
    arguments = (
        "{'tags': {'vip', 'eu', 'late', 'b2b', 'x'}, 'ids': [frozenset({'a', 'b'})],"
        " 'maybe': {1, None}}"
    )
    assert len({_hash_in_a_process(seed, arguments) for seed in ("1", "2", "3", "4")}) == 1


def test_the_input_hash_of_numbers_in_a_set_is_what_it_was() -> None:
    """Sets of numbers, and of one element, iterate alike everywhere: their hash is the
    plain serialization's, as before, so effects journaled earlier still replay."""
    serde = SafeSerializer()
    arguments = {"ids": {3, 1, 2}, "n": 1, "one": {"vip"}, "none": set()}
    kind, data = serde.dumps_typed(arguments)
    plain = hashlib.sha256(kind.encode() + b"\x00" + data).hexdigest()[:32]
    assert input_hash(serde, "tag", arguments) == plain


def test_call_tokens_are_unique_across_threads() -> None:
    tokens: list[str] = []

    def draw() -> None:
        tokens.extend(next_call_token() for _ in range(2000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(tokens)) == len(tokens) == 8000


def test_a_forked_child_draws_tokens_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked child keeps its parent's journal, so its lease owner and its counter: only
    the token's prefix tells their calls apart. The child draws a prefix of its own when it
    sees a pid other than the one the prefix was drawn in, whether or not the fork ran
    Python's fork hooks (a prefork server's fork does not)."""
    monkeypatch.setattr(_call, "_call_prefix", (os.getpid() + 1, "parent00"))
    theirs = next_call_token()
    assert not theirs.startswith("parent00")
    assert next_call_token()[:8] == theirs[:8]  # drawn once
