"""Rules the statements in queries.sql keep, checked on their text."""

from __future__ import annotations

import re
from typing import Any

import pytest
from put_params import put_params

from langgraph_durable._sql import (
    INLINE_ROWS,
    PSYCOPG_CACHED_QUERY_BYTES,
    PSYCOPG_CACHED_QUERY_PARAMS,
    QUERIES,
    STATEMENT_BLOCKS,
    _assemble,
    complete_effect,
    parameter_names,
    put_checkpoint_statement,
    store_writes,
)

SYNCHRONOUS = "set_config('synchronous_commit', 'on', true)"
# Writes to the journal that decide nothing: a counter of replays shown to operators.
NOT_DECISIONS = {"effect_replayed"}


def writes(text: str) -> bool:
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return re.search(r"\b(INSERT|UPDATE|DELETE)\b", body) is not None


def test_every_journal_write_commits_synchronously() -> None:
    """I1: a journal row is durable before the receiver is called, whatever the session's
    synchronous_commit (the saver may run with it off)."""
    journal_writes = {
        name
        for name, text in QUERIES.items()
        if name.startswith("effect_")
        and writes(text)
        and name not in NOT_DECISIONS | STATEMENT_BLOCKS
    }
    assert {"effect_claim", "effect_complete", "effect_extend_lease"} <= journal_writes
    missing = sorted(name for name in journal_writes if SYNCHRONOUS not in QUERIES[name])
    assert missing == []


def statement_for(blobs: int = 0, writes: int = 0, **flags: Any) -> str:
    return put_checkpoint_statement(put_params(blobs, writes, **flags))[0]


def test_the_checkpoint_statement_carries_only_the_blocks_a_call_needs() -> None:
    """Each data-modifying CTE costs the server even when it inserts nothing; the full
    statement (for `put_txn` and readers of QUERIES) has every block."""
    lean = statement_for()
    for cte in ("new_blobs AS", "parked_writes AS", "events AS", "progress AS"):
        assert cte not in lean
        assert cte in QUERIES["put_checkpoint"]
    assert "fence AS" in lean
    assert "langgraph_durable_threads" not in lean  # no token: no lookup
    assert "INSERT INTO checkpoints" in lean
    fenced = statement_for(fence_token=7)
    assert "t.fencing_token = %(fence_token)s::bigint" in fenced
    many = INLINE_ROWS + 1
    full = statement_for(many, many, e_ids=["e"], run_id="r", fence_token=7)
    assert full == QUERIES["put_checkpoint"]
    assert "unnest(%(blobs)b::bytea[])" in full
    only_writes = statement_for(writes=many)
    assert "parked_writes AS" in only_writes
    assert "new_blobs AS" not in only_writes


def test_a_few_blobs_and_parked_writes_go_as_rows_of_scalar_parameters() -> None:
    """Up to INLINE_ROWS of each, numbered from 0, taken from the column arrays; the
    arrays are then neither unnested nor passed."""
    params = put_params(INLINE_ROWS, 1)
    query, args = put_checkpoint_statement(params)
    assert "unnest(" not in query
    last = INLINE_ROWS - 1
    assert f"%(b{last}_blob)s::bytea" in query
    assert f"%(b{INLINE_ROWS}_blob)s" not in query
    assert "%(w0_idx)s::int" in query
    assert "%(w1_idx)s" not in query
    assert args[f"b{last}_channel"] == f"c{last}"
    assert args["b0_blob"] == b"b0"
    assert args["w0_checkpoint_id"] == "k"
    assert args["w0_idx"] == 0
    assert "blobs" not in args
    assert "w_idxs" not in args
    assert "channels" in params  # the caller's parameters are left as they were
    many = put_checkpoint_statement(put_params(INLINE_ROWS + 1, INLINE_ROWS + 1))[0]
    assert "unnest(%(blobs)b::bytea[])" in many
    assert "unnest(%(w_blobs)b::bytea[])" in many


@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("events", [False, True])
@pytest.mark.parametrize("progress", [False, True])
def test_every_checkpoint_statement_stays_within_psycopgs_query_cache(
    fenced: bool, events: bool, progress: bool
) -> None:
    """Past either limit psycopg parses the statement's placeholders again on every
    execute (150-200 us of CPU per put): the statement text and the keys passed."""
    flags: dict[str, Any] = {
        "fence_token": 7 if fenced else None,
        "run_id": "r" if progress else None,
    }
    if events:
        flags.update(e_ids=["e"], e_types=["x"], e_keys=["k"], e_payloads=["{}"], e_task_ids=["t"])
    for blobs in range(INLINE_ROWS + 2):
        for writes in range(INLINE_ROWS + 2):
            query, args = put_checkpoint_statement(put_params(blobs, writes, **flags))
            assert len(query.encode()) <= PSYCOPG_CACHED_QUERY_BYTES, (blobs, writes)
            assert len(args) <= PSYCOPG_CACHED_QUERY_PARAMS, (blobs, writes)
            assert set(args) == set(parameter_names(query))
            assert "--" not in query  # comments document the blocks in the file only
            assert args == expected_arguments(put_params(blobs, writes, **flags), args)


_ROW_ARRAYS = {
    "b": {"channel": "channels", "version": "versions", "type": "types", "blob": "blobs"},
    "w": {
        "checkpoint_id": "w_checkpoint_ids",
        "task_id": "w_task_ids",
        "task_path": "w_task_paths",
        "idx": "w_idxs",
        "channel": "w_channels",
        "type": "w_types",
        "blob": "w_blobs",
    },
}


def expected_arguments(params: dict[str, Any], names: Any) -> dict[str, Any]:
    """What each named parameter must hold: a row's `<b|w><i>_<column>` the i-th item of
    its column array, any other the parameter of that name as given."""
    expected: dict[str, Any] = {}
    for name in names:
        prefix, row, column = name[0], name[1:].partition("_")[0], name.partition("_")[2]
        if prefix in _ROW_ARRAYS and row.isdigit() and column in _ROW_ARRAYS[prefix]:
            expected[name] = params[_ROW_ARRAYS[prefix][column]][int(row)]
        else:
            expected[name] = params[name]
    return expected


def test_writes_and_completions_carry_an_events_block_only_with_events() -> None:
    """The same rule for a task's writes and an effect's completion: most have no events."""
    for replace in (False, True):
        lean = store_writes(fenced=False, replace=replace, events=False)
        assert "events AS" not in lean
        assert "langgraph_durable_threads" not in lean
        assert "stored AS" in lean
        assert lean.rstrip().endswith("SELECT ok FROM fence")
        assert "events AS" in store_writes(fenced=False, replace=replace, events=True)
        assert "t.fencing_token" in store_writes(fenced=True, replace=replace, events=False)
    assert "DO UPDATE" in QUERIES["upsert_writes"]
    assert "DO UPDATE" not in QUERIES["insert_writes"]
    lean = complete_effect(events=False)
    assert "events AS" not in lean
    assert SYNCHRONOUS in lean
    assert complete_effect(events=True) == QUERIES["effect_complete"]
    assert "events AS" in QUERIES["effect_complete"]


def test_statement_blocks_are_known_and_only_assembled() -> None:
    """Whole-statement rules skip exactly the listed blocks, and every one of them exists."""
    assert set(QUERIES) >= STATEMENT_BLOCKS
    with pytest.raises(KeyError):
        _assemble("writes_fence", "effect_fail")
