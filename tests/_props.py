"""Shared pieces of the property tests: how many examples, and hostile text.

`examples(n)` is a test's example count in the suite; the long profile
(`LANGGRAPH_DURABLE_HYPOTHESIS=long` or `--hypothesis-profile long`) runs `LONG_FACTOR`
times as many.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st

LONG_FACTOR = 20


def long_mode() -> bool:
    return settings.get_current_profile_name() == "long"


def examples(n: int) -> int:
    """`n` examples in the suite, `n * LONG_FACTOR` in the long profile."""
    return n * LONG_FACTOR if long_mode() else n


def timeout() -> Any:
    """The pytest-timeout mark of a property module: the suite's 300 s, an hour when long."""
    return pytest.mark.timeout(3600 if long_mode() else 300)


# Text as users send it: any unicode, including quotes, backslashes, SQL, emoji, RTL marks,
# lone surrogates excluded (Python strings from JSON cannot hold them either) and NUL kept
# apart (`NUL` below), since NUL is rejected by design.
_SQLISH = st.sampled_from(
    ["'", '"', "\\", ";", "--", "/*", "%s", "%(x)s", "{}", "$1", "DROP TABLE checkpoints", " "]
)
HOSTILE_TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    st.lists(_SQLISH, max_size=4).map("".join),
)
NUL = "\x00"


def with_nul(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """`text`, with a NUL spliced in about a third of the time."""
    return st.tuples(text, st.integers(0, 2), text).map(
        lambda t: t[0] + ("\x00" if t[1] == 0 else "") + t[2]
    )


def json_like(
    text: st.SearchStrategy[str], floats: st.SearchStrategy[float]
) -> st.SearchStrategy[Any]:
    """Values a node or an effect passes around: JSON-like, nested a little."""
    return st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | floats | text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=6,
    )


def same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and checks types, recursively."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def keeps_float(value: float) -> bool:
    """Not an integral float of 1e16 or more: those come back as ints from JSONB
    (test_property_findings.py::test_a_large_float_state_value_keeps_its_type)."""
    return not (value.is_integer() and abs(value) >= 1e16)
