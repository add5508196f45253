"""With an encrypting serializer, nothing secret is readable in the raw tables.

A graph runs with AES (LangGraph's `EncryptedSerializer.from_pycryptodome_aes`, wrapped in
our `SafeEncryptedSerializer`) and puts the word SECRET everywhere a user's data can go:
string, number and flag channel values (which upstream keeps in the checkpoint's JSON), a
`configurable` value named like a key (which LangGraph copies into metadata), the error
text of a failing effect and of a failing run, a run's input and output. Every table is
then read raw, as someone with a copy of the database would: the word is nowhere. Our API
still reads everything back, and upstream's `PostgresSaver` with the same cipher reads the
checkpoints.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import (
    DurablePostgresSaver,
    EffectFailedError,
    EffectJournal,
    GraphVersion,
    MetadataRedaction,
    RunRegistry,
    RunStatus,
    Worker,
    effect,
)
from langgraph_durable.effects import journal_of
from langgraph_durable.serde import SafeEncryptedSerializer

KEY = b"0123456789abcdef0123456789abcdef"
WORD = "SECRET"


class State(TypedDict, total=False):
    note: str
    amount: int
    flag: bool
    log: Annotated[list[str], operator.add]


def aes() -> tuple[EncryptedSerializer, SafeEncryptedSerializer]:
    upstream = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    return upstream, SafeEncryptedSerializer(upstream.cipher)


@pytest.fixture
def encrypted(fresh_db_dsn: str) -> Iterator[DurablePostgresSaver]:
    _, serde = aes()
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn, serde=serde) as saver:
        saver.setup()
        yield saver


def raw_text(dsn: str) -> str:
    """Every user-data column of every table, as text (bytes decoded leniently)."""
    parts: list[str] = []
    with psycopg.connect(dsn) as conn:
        for table, columns in {
            "checkpoints": ["checkpoint::text", "metadata::text"],
            "checkpoint_blobs": ["blob"],
            "checkpoint_writes": ["blob"],
            "langgraph_durable_effects": ["error_message", "result"],
            "langgraph_durable_runs": ["error_message", "input", "output", "config::text"],
        }.items():
            for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall():
                for value in row:
                    if isinstance(value, (bytes, memoryview)):
                        parts.append(bytes(value).decode("utf-8", "replace"))
                    elif value is not None:
                        parts.append(str(value))
    return "\n".join(parts)


def test_nothing_secret_is_readable_in_the_raw_tables(
    encrypted: DurablePostgresSaver, fresh_db_dsn: str
) -> None:
    thread = f"enc-{uuid.uuid4().hex[:6]}"

    @effect(name="charge")
    def charge(amount: int) -> str:
        raise ValueError(f"card {WORD}-4242 declined for {amount}")

    def pay(state: State) -> State:
        try:
            charge(state["amount"])
        except (ValueError, EffectFailedError):
            return {"log": [f"payment failed ({WORD})"]}
        return {}

    builder = StateGraph(State)
    builder.add_node("note", lambda s: {"note": f"{WORD} note", "amount": 420, "flag": True})
    builder.add_node("pay", pay)
    builder.add_edge(START, "note")
    builder.add_edge("note", "pay")
    builder.add_edge("pay", END)
    graph = builder.compile(checkpointer=encrypted)
    config: Any = {"configurable": {"thread_id": thread, "api_key": f"sk-{WORD}", "user": "u1"}}
    graph.invoke({"log": []}, config)

    def fail(state: State) -> State:
        raise RuntimeError(f"the run failed: {WORD}")

    failing = StateGraph(State)
    failing.add_node("fail", fail)
    failing.add_edge(START, "fail")
    failing.add_edge("fail", END)
    version = GraphVersion("enc-fail", "1", failing.compile(checkpointer=encrypted))
    runs = RunRegistry(encrypted)
    run = runs.create(
        version,
        {"note": f"input {WORD}"},
        config={"configurable": {"api_key": f"sk-{WORD}"}},
        max_attempts=1,
    )
    Worker(encrypted, [version]).run_until_idle()

    assert WORD not in raw_text(fresh_db_dsn)

    # ... and everything reads back through the API.
    values = graph.get_state(config).values
    assert values == {
        "note": f"{WORD} note",
        "amount": 420,
        "flag": True,
        "log": [f"payment failed ({WORD})"],
    }
    journal = journal_of(encrypted)
    assert isinstance(journal, EffectJournal)
    (key,) = _keys(fresh_db_dsn)
    row = journal.details(key)
    assert row is not None
    assert f"{WORD}-4242" in row["error_message"]
    failed = runs.get(run.run_id)
    assert failed.status is RunStatus.ERROR
    assert failed.error_message == f"the run failed: {WORD}"
    assert runs.input_of(failed) == {"note": f"input {WORD}"}
    assert failed.config == {"api_key": f"sk-{WORD}"}  # what the worker passed the graph
    metadata = encrypted.get_tuple(config).metadata  # type: ignore[union-attr]
    assert (metadata["api_key"], metadata["user"]) == ("[redacted]", "u1")

    # Upstream, with the same cipher, reads the checkpoints we wrote.
    upstream_serde, _ = aes()
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        found = PostgresSaver(conn, serde=upstream_serde).get_tuple(config)  # type: ignore[arg-type]
    assert found is not None
    assert found.checkpoint["channel_values"]["note"] == f"{WORD} note"
    assert found.checkpoint["channel_values"]["amount"] == 420


def _keys(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [k for (k,) in conn.execute("SELECT key FROM langgraph_durable_effects")]


def test_metadata_redaction_keeps_what_it_is_told(db_dsn: str) -> None:
    def run(redaction: MetadataRedaction) -> dict[str, Any]:
        with DurablePostgresSaver.from_conn_string(db_dsn, metadata_redaction=redaction) as saver:
            saver.setup()
            builder = StateGraph(State)
            builder.add_node("a", lambda s: {"note": "a"})
            builder.add_edge(START, "a")
            builder.add_edge("a", END)
            thread = f"red-{uuid.uuid4().hex[:6]}"
            config: Any = {
                "configurable": {
                    "thread_id": thread,
                    "api_key": "sk-1",
                    "session_token": "t-1",
                    "tenant": "acme",
                }
            }
            builder.compile(checkpointer=saver).invoke({}, config)
            found = saver.get_tuple(config)
            assert found is not None
            return dict(found.metadata)

    default = run(MetadataRedaction())
    assert (default["api_key"], default["session_token"], default["tenant"]) == (
        "[redacted]",
        "[redacted]",
        "acme",
    )
    allowed = run(MetadataRedaction(allow=frozenset({"session_token"})))
    assert (allowed["api_key"], allowed["session_token"]) == ("[redacted]", "t-1")
    custom = run(MetadataRedaction(redact=lambda key, value: key == "tenant"))
    assert (custom["api_key"], custom["tenant"]) == ("sk-1", "[redacted]")


def test_token_counts_in_metadata_filter_as_upstreams_do(fresh_db_dsn: str) -> None:
    """`list(filter=...)` on a count or limit that mentions tokens finds what upstream's
    saver finds (they are not secrets), while a real token is still redacted."""

    def run(saver: Any) -> tuple[dict[str, Any], int, int, int]:
        saver.setup()
        builder = StateGraph(State)
        builder.add_node("a", lambda s: {"note": "a"})
        builder.add_edge(START, "a")
        builder.add_edge("a", END)
        config: Any = {
            "configurable": {"thread_id": "tok", "max_tokens": 500, "access_token": "at-1"},
            "metadata": {"token_count": 7},
        }
        builder.compile(checkpointer=saver).invoke({}, config)
        found = saver.get_tuple(config)
        assert found is not None
        return (
            dict(found.metadata),
            len(list(saver.list(None, filter={"max_tokens": 500}))),
            len(list(saver.list(None, filter={"token_count": 7}))),
            len(list(saver.list(None, filter={"access_token": "at-1"}))),
        )

    with PostgresSaver.from_conn_string(fresh_db_dsn) as upstream:
        expected = run(upstream)
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        metadata, by_limit, by_count, by_secret = run(saver)
    assert expected[1:] == (3, 3, 3)  # upstream: the input, loop and final checkpoints
    assert (by_limit, by_count) == expected[1:3]
    assert (metadata["max_tokens"], metadata["token_count"]) == (500, 7)
    assert (metadata["access_token"], by_secret) == ("[redacted]", 0)


def test_effects_replay_under_encryption_and_keep_their_input_hash_sealed(
    encrypted: DurablePostgresSaver, fresh_db_dsn: str
) -> None:
    """Encryption takes a new nonce each time: an input hash over encrypted bytes would
    differ on every call, and every replay would raise `EffectInputMismatchError`. The
    hash is over the plain arguments, and stored sealed (a plain hash of a low-entropy
    input, such as an amount, would confirm guesses)."""
    journal = journal_of(encrypted)
    sent: list[int] = []

    @effect(key=lambda amount: f"refund:{WORD}", journal=journal, name="refund")
    def refund(amount: int) -> str:
        sent.append(amount)
        return f"refunded {amount}"

    assert refund(42) == "refunded 42"
    assert refund(42) == "refunded 42"  # a replay: the stored result
    assert sent == [42]
    with psycopg.connect(fresh_db_dsn) as conn:
        ((stored,),) = conn.execute(
            "SELECT input_hash FROM langgraph_durable_effects WHERE key = %s", (f"refund:{WORD}",)
        ).fetchall()
    assert stored.startswith("lgd-sealed:")
