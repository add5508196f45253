"""Hostile input, as properties (issue 15, item 6; invariant I8).

For random ids, namespaces, task ids, channel names, metadata, metadata filters, state
values, effect inputs and results (any unicode, NUL, quotes and SQL, NaN and infinities,
objects no serializer takes), every call either does what it says (what was stored reads
back the same) or raises a named `InvalidInputError` before anything is written, checked
by counting the rows of the raw tables before and after. A raw driver error, or any other
exception, fails the property.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from _props import (
    HOSTILE_TEXT,
    examples,
    json_like,
    keeps_float,
    same,
    timeout,
    with_nul,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import (
    DurableError,
    DurablePostgresSaver,
    EffectJournal,
    EffectResultNotStoredError,
    InvalidInputError,
    effect,
)

pytestmark = [pytest.mark.properties, timeout()]

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "langgraph_durable_effects")

IDS = with_nul(HOSTILE_TEXT)
ANY_FLOAT = st.floats().filter(keeps_float)  # NaN and infinities: must round-trip
VALUES = json_like(with_nul(HOSTILE_TEXT), ANY_FLOAT)
UNSERIALIZABLE = st.sampled_from([threading.Lock, lambda: lambda: None, object]).map(
    lambda make: make()
)
# A value, sometimes one no serializer takes.
MAYBE_BAD = st.one_of(VALUES, VALUES, VALUES, UNSERIALIZABLE)
# Metadata is JSONB: floats beyond 2**53 change (test_saver_properties.py), NaN is refused.
METADATA = st.dictionaries(
    with_nul(HOSTILE_TEXT),
    json_like(with_nul(HOSTILE_TEXT), st.floats(-(2.0**53), 2.0**53) | st.just(float("nan"))),
    max_size=3,
)


@pytest.fixture(scope="module")
def saver(db_dsn: str) -> Iterator[DurablePostgresSaver]:
    with DurablePostgresSaver.from_conn_string(db_dsn) as found:
        found.setup()
        yield found


def counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in TABLES
        }


def rejected(exc: DurableError, before: dict[str, int], dsn: str) -> None:
    """A rejection is an InvalidInputError, and nothing was written."""
    assert isinstance(exc, InvalidInputError), f"not a named rejection: {exc!r}"
    assert counts(dsn) == before, f"rejected ({exc}) after writing"


@settings(max_examples=examples(60))
@given(
    thread=IDS,
    ns=st.just("") | IDS,
    values=st.dictionaries(with_nul(HOSTILE_TEXT), MAYBE_BAD, max_size=3),
    metadata=METADATA,
    writes=st.lists(
        st.tuples(with_nul(HOSTILE_TEXT), MAYBE_BAD),
        max_size=3,
    ),
    task_id=IDS,
)
def test_put_and_put_writes_store_exactly_or_write_nothing(
    saver: DurablePostgresSaver,
    db_dsn: str,
    thread: str,
    ns: str,
    values: dict[str, Any],
    metadata: dict[str, Any],
    writes: list[tuple[str, Any]],
    task_id: str,
) -> None:
    thread = f"{uuid.uuid4().hex[:8]}:{thread}"  # each example on a thread of its own
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    versions = {channel: i + 1 for i, channel in enumerate(values)}
    checkpoint["channel_versions"] = dict(versions)
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}

    before = counts(db_dsn)
    try:
        stored = saver.put(config, checkpoint, dict(metadata), dict(versions))
    except DurableError as exc:
        rejected(exc, before, db_dsn)
        return
    found = saver.get_tuple(stored)
    assert found is not None
    assert same(found.checkpoint["channel_values"], values)
    assert found.metadata == metadata
    assert found.config["configurable"]["thread_id"] == thread
    assert found.config["configurable"]["checkpoint_ns"] == ns

    before = counts(db_dsn)
    try:
        saver.put_writes(stored, writes, task_id)
    except DurableError as exc:
        rejected(exc, before, db_dsn)
        return
    found = saver.get_tuple(stored)
    assert found is not None
    # A channel written twice by one task keeps one row per index: all writes come back.
    got = [(t, c, v) for t, c, v in found.pending_writes or []]
    assert len(got) == len(writes)
    for (task, channel, value), (sent_channel, sent_value) in zip(got, writes, strict=True):
        assert (task, channel) == (task_id, sent_channel)
        assert same(value, sent_value)


@settings(max_examples=examples(60))
@given(
    filter_=st.dictionaries(
        with_nul(HOSTILE_TEXT),
        json_like(with_nul(HOSTILE_TEXT), st.floats()) | UNSERIALIZABLE,
        max_size=2,
    ),
    limit=st.none() | st.integers(-2, 3),
)
def test_list_filters_answer_or_are_rejected_by_name(
    saver: DurablePostgresSaver, filter_: dict[str, Any], limit: int | None
) -> None:
    thread = f"filters-{uuid.uuid4().hex[:8]}"
    for step in range(3):
        metadata: Any = {"step": step, "who": "q'\"; --", "tags": ["a", "ü"], **filter_}
        if step == 1:
            metadata = {"step": step}
        checkpoint = empty_checkpoint()
        try:
            saver.put(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                checkpoint,
                metadata,
                {},
            )
        except InvalidInputError:
            continue  # the filter's own values may not be storable; the query still must be
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    try:
        listed = list(saver.list(config, filter=filter_, limit=limit))
    except InvalidInputError:
        return
    every = list(saver.list(config))
    assert {t.checkpoint["id"] for t in listed} <= {t.checkpoint["id"] for t in every}
    for found in listed:
        assert set(filter_) <= set(found.metadata)
        for key, value in filter_.items():
            if value is None or isinstance(value, (str, bool)):
                assert found.metadata[key] == value, "listed a checkpoint the filter excludes"


@pytest.fixture(scope="module")
def journal(saver: DurablePostgresSaver) -> EffectJournal:
    return EffectJournal(saver.conn)


@settings(max_examples=examples(60))
@given(key=IDS, payload=MAYBE_BAD, result=MAYBE_BAD)
def test_an_effect_acts_once_or_is_refused_by_name(
    journal: EffectJournal, db_dsn: str, key: str, payload: Any, result: Any
) -> None:
    calls: list[Any] = []

    def send(payload: Any) -> Any:
        calls.append(payload)
        return result

    before = counts(db_dsn)
    try:
        # A key that cannot be stored is refused here, when the effect is made.
        journaled = effect(
            name="hostile.send", key=f"{uuid.uuid4().hex[:8]}:{key}", journal=journal
        )(send)
        got = journaled(payload)
    except EffectResultNotStoredError:
        # It acted, and the journal says so (the row stays unknown): never called again.
        assert len(calls) == 1
        with pytest.raises(DurableError):
            journaled(payload)
        assert len(calls) == 1
        return
    except DurableError as exc:
        rejected(exc, before, db_dsn)
        assert calls == [], "refused after calling the receiver"
        return
    assert same(got, result)
    assert same(journaled(payload), result), "the replay differs from the first result"
    assert len(calls) == 1
