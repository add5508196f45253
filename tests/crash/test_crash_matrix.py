"""The crash matrix's fast mode: a fixed sample of its cells, and its control (`matrix.py`).

The sample covers both workflows, the three durability modes, both saver classes, every
kind of named point (saver, effect, run, and a SIGKILL from outside before a node) and the
three faults that leave the worker alive (sessions terminated, TCP connections cut, the
server restarted: a private embedded one). Each
trial's fault must really strike (the worker died there, or noted the fault), and after
the resumes nothing may be duplicated, missing, unfinished or asked twice.

The control runs the same machinery with `@effect` journaling nothing: the counts must then
show what the journal prevents, or the matrix could not see a duplicate at all. The long mode
(`python tests/crash/matrix.py --trials 300 --write docs/reliability.md`) runs on demand.
"""

from __future__ import annotations

import pytest
from matrix import Counts, Trial, run_trials

pytestmark = pytest.mark.crash

SAMPLE = [
    Trial("seven", "async", "async", "put:after_commit", after=5),
    Trial("seven", "exit", "sync", "put:after_commit", after=0),
    Trial("seven", "sync", "async", "put_writes:after_commit", after=2),
    Trial("seven", "exit", "async", "effect:after_claim", after=4),
    Trial("seven", "async", "sync", "effect:after_call", after=1),
    Trial("seven", "sync", "async", "node:create_task"),
    Trial("seven", "exit", "async", "node:notify"),
    Trial("seven", "async", "sync", "effect:after_call", after=3, fault="terminate"),
    Trial("seven", "sync", "async", "put:after_commit", after=4, fault="drop"),
    Trial("refund", "sync", "sync", "run:after_claim", after=1),
    Trial("refund", "exit", "async", "run:before_finish", after=1),
    Trial("refund", "async", "sync", "put:after_commit", after=4),
    Trial("refund", "sync", "async", "effect:after_claim", after=0),
    Trial("refund", "async", "async", "effect:after_call", after=2),
    Trial("refund", "exit", "async", "effect:after_result", after=1),
    Trial("refund", "sync", "sync", "effect:after_call", after=1, fault="terminate"),
    Trial("refund", "async", "async", "put:after_commit", after=2, fault="drop"),
    Trial("seven", "sync", "async", "effect:after_call", after=2, fault="restart"),
    Trial("refund", "exit", "sync", "put:after_commit", after=0, fault="restart"),
]
PARALLEL = 3


def test_every_fault_of_the_sample_strikes_and_nothing_is_repeated_lost_or_left(
    db_dsn: str,
) -> None:
    results = run_trials(db_dsn, SAMPLE, parallel=PARALLEL)
    missed = [t.cell for t, c in zip(SAMPLE, results, strict=True) if not c.faults_struck]
    assert missed == [], "these faults never struck: the sample no longer tests them"
    failed = {
        t.cell: (c.failures, c.story) for t, c in zip(SAMPLE, results, strict=True) if c.failures
    }
    assert failed == {}


def test_the_control_without_the_journal_counts_what_the_journal_prevents(db_dsn: str) -> None:
    """Killed before step 7 under "exit": the input runs again, and without the journal
    the CRM gets a deal and a task again, under new keys. (The model calls still go through
    the journaled model, which the control leaves alone: the note's prompt now names
    another deal, and the journal refuses it by name, so the run does not finish.)"""
    control = [Trial("seven", "exit", "sync", "node:notify", journaled=False)]
    total = Counts()
    for counts in run_trials(db_dsn, control, parallel=1):
        total.add(counts)
    assert total.faults_struck == 1
    assert total.duplicates_at_key_honouring_receivers == 2
    assert total.unnamed_errors_seen == 0
