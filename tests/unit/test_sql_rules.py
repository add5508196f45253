"""Rules the statements in queries.sql keep, checked on their text."""

from __future__ import annotations

import re

from langgraph_durable._sql import QUERIES

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
        if name.startswith("effect_") and writes(text) and name not in NOT_DECISIONS
    }
    assert {"effect_claim", "effect_complete", "effect_extend_lease"} <= journal_writes
    missing = sorted(name for name in journal_writes if SYNCHRONOUS not in QUERIES[name])
    assert missing == []
