"""Unknown outcomes with real receivers that act and then fail: never silently repeated.

Each receiver is an HTTP server on a local port (`tests/receivers.py`). It performs the
action and then times out or drops the connection, which is where duplicates hide: the
client sees an error although the receiver acted. The count of actions at the receiver is
what the tests check, with the journal row that says what happened.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.errors import GraphInterrupt
from psycopg_pool import ConnectionPool
from receivers import Receiver, acted, closed_port, post, receiver

from langgraph_durable import (
    AsyncDurablePostgresSaver,
    AsyncEffectJournal,
    DurablePostgresSaver,
    EffectError,
    EffectFailedError,
    EffectInProgressError,
    EffectJournal,
    EffectOutcomeUnknown,
    EffectResultNotStoredError,
    InvalidInputError,
    Reconciled,
    RetryPolicy,
    effect,
)
from langgraph_durable.effects._keys import input_hash
from langgraph_durable.effects._protocol import RESULT_NOT_STORED, EffectStatus

FAST = RetryPolicy(initial_delay=0.01, jitter=0)
"""Short backoffs: a test waits on the journal's clock, never on a guess."""

FAST_IDEMPOTENT = RetryPolicy(initial_delay=0.01, jitter=0, unknown_outcome="retry")


@pytest.fixture(scope="module")
def journal(db_dsn: str) -> Iterator[EffectJournal]:
    with DurablePostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        assert isinstance(saver.conn, ConnectionPool)
        yield EffectJournal(saver.conn)


@pytest.fixture
def mailer() -> Iterator[Receiver]:
    """A receiver that ignores idempotency keys: every request sends a mail."""
    with receiver() as found:
        yield found


@pytest.fixture
def payments() -> Iterator[Receiver]:
    """A receiver that honours idempotency keys, like a payment API."""
    with receiver(honours_keys=True) as found:
        yield found


def new_key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


# --- a timeout or a dropped connection leaves the outcome open -----------------------------


@pytest.mark.parametrize("failure", ["hang", "drop"])
def test_an_error_after_the_receiver_acted_is_unknown_and_never_repeated(
    journal: EffectJournal, mailer: Receiver, failure: Any
) -> None:
    """Default policy, receiver ignores keys: one mail, the call stops, the row says why."""
    key = new_key("mail")
    mailer.mode = failure

    @effect(key=key, journal=journal, retry=FAST)
    def send_mail(to: str) -> int:
        return post(mailer.url, key, to, timeout=0.2)

    with pytest.raises(EffectOutcomeUnknown, match="may or may not have acted") as raised:
        send_mail("ana@example.com")
    assert isinstance(raised.value.__cause__, (TimeoutError, ConnectionError))
    assert mailer.count(key) == 1
    row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.UNKNOWN
    assert row.attempt == 1
    assert row.error_type in ("TimeoutError", "RemoteDisconnected", "ConnectionResetError")
    assert row.error_type is not None
    assert row.error_type in str(raised.value)

    # A resume asks again: still unknown, still one mail.
    mailer.mode = "ok"
    with pytest.raises(EffectOutcomeUnknown):
        send_mail("ana@example.com")
    assert mailer.count(key) == 1

    # An operator checks the mailer and records what it did; replays return that.
    journal.resolve(key, completed=1)
    assert send_mail("ana@example.com") == 1
    assert mailer.count(key) == 1


def test_a_reconcile_hook_is_asked_after_a_timeout_and_its_answer_stored(
    journal: EffectJournal, mailer: Receiver
) -> None:
    key = new_key("mail-rec")
    asked: list[str] = []
    mailer.script = ["hang"]

    def find_mail(idempotency_key: str, to: str) -> Reconciled:
        asked.append(idempotency_key)
        found = acted(mailer.url, idempotency_key)
        return Reconciled.completed(found) if found is not None else Reconciled.absent()

    @effect(key=key, journal=journal, retry=FAST, reconcile=find_mail)
    def send_mail(to: str) -> int:
        return post(mailer.url, key, to, timeout=0.2)

    first_id = send_mail("ana@example.com")
    assert asked == [key]
    assert mailer.count(key) == 1
    assert first_id == mailer.acted[0]["id"]
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.COMPLETED, 1)
    assert send_mail("ana@example.com") == first_id  # replayed
    assert asked == [key]


def test_a_reconcile_that_finds_nothing_attempts_again(
    journal: EffectJournal, mailer: Receiver
) -> None:
    """A connection dropped before the receiver read the request: reconcile says absent."""
    key = new_key("mail-absent")
    calls: list[str] = []

    def find_mail(idempotency_key: str) -> Reconciled:
        found = acted(mailer.url, idempotency_key)
        return Reconciled.completed(found) if found is not None else Reconciled.absent()

    @effect(key=key, journal=journal, retry=FAST, reconcile=find_mail)
    def send_mail() -> int:
        calls.append("call")
        if len(calls) == 1:
            raise ConnectionResetError("reset before the request was read")
        return post(mailer.url, key)

    assert send_mail() == 1
    assert calls == ["call", "call"]
    assert mailer.count(key) == 1
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.COMPLETED, 2)


def test_a_receiver_that_honours_keys_is_retried_with_the_same_key(
    journal: EffectJournal, payments: Receiver
) -> None:
    key = new_key("charge")
    payments.script = ["hang", "drop"]

    @effect(key=key, journal=journal, retry=FAST_IDEMPOTENT)
    def charge(amount: int, idempotency_key: str = "") -> int:
        return post(payments.url, idempotency_key, amount, timeout=0.2)

    assert charge(420) == 1
    assert payments.requests == 3  # the same key three times
    assert payments.count(key) == 1  # acted once
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.COMPLETED, 3)


def test_attempts_after_unknown_outcomes_stop_at_max_attempts(
    journal: EffectJournal, payments: Receiver
) -> None:
    key = new_key("charge-max")
    payments.mode = "drop"
    policy = RetryPolicy(max_attempts=2, initial_delay=0.01, jitter=0, unknown_outcome="retry")

    @effect(key=key, journal=journal, retry=policy)
    def charge(idempotency_key: str = "") -> int:
        return post(payments.url, idempotency_key)

    with pytest.raises(EffectOutcomeUnknown, match="all 2 attempts were used"):
        charge()
    assert payments.requests == 2
    assert payments.count(key) == 1
    with pytest.raises(EffectOutcomeUnknown):  # a resume does not start a third attempt
        charge()
    assert payments.requests == 2


def test_errors_declared_as_not_sent_retry_in_process(
    journal: EffectJournal, mailer: Receiver
) -> None:
    """A refused connection proves nothing went out: retried at once, with backoff."""
    key = new_key("refused")
    urls = [closed_port(), closed_port(), mailer.url]

    @effect(key=key, journal=journal, retry=FAST)
    def send_mail() -> int:
        return post(urls.pop(0), key)

    assert send_mail() == 1
    assert mailer.count(key) == 1
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.COMPLETED, 3)


def test_a_policy_names_its_clients_errors(journal: EffectJournal) -> None:
    """Client libraries have their own errors; the policy says which mean what."""

    class NotSent(Exception):
        pass

    class ReadTimeout(Exception):
        pass

    policy = RetryPolicy(
        initial_delay=0.01, jitter=0, retry_on=(NotSent,), unknown_on=(ReadTimeout,)
    )
    errors: list[Exception] = [NotSent("connect failed"), ReadTimeout("no answer")]
    key = new_key("client")

    @effect(key=key, journal=journal, retry=policy)
    def call() -> str:
        raise errors.pop(0)

    with pytest.raises(EffectOutcomeUnknown, match="ReadTimeout"):
        call()
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.UNKNOWN, 2)


def test_an_outage_longer_than_the_retries_never_fails_the_key_for_good(
    journal: EffectJournal, mailer: Receiver
) -> None:
    """Nothing was sent: the call gives up, the key stays free, a later call succeeds."""
    key = new_key("outage")
    urls = [closed_port(), closed_port(), closed_port(), mailer.url]

    @effect(key=key, journal=journal, retry=RetryPolicy(max_attempts=2, initial_delay=0.01))
    def send() -> int:
        return post(urls.pop(0), key)

    with pytest.raises(ConnectionRefusedError):
        send()  # two tries, both refused
    row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.RETRY_WAIT
    assert send() == 1  # the resume: refused once more, then the mailer is back
    assert mailer.count(key) == 1


def test_a_failed_effect_can_be_allowed_to_try_again(journal: EffectJournal) -> None:
    key = new_key("declined")
    answers: list[Any] = [ValueError("card declined"), "charged"]

    @effect(key=key, journal=journal)
    def charge() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    with pytest.raises(ValueError, match="declined"):
        charge()
    with pytest.raises(EffectFailedError, match="--allow-retry"):
        charge()
    journal.resolve(key, allow_retry=True)  # the customer updated the card
    assert charge() == "charged"


def test_a_live_attempt_cannot_be_resolved_by_hand(journal: EffectJournal) -> None:
    key = new_key("live")
    started, release = threading.Event(), threading.Event()

    @effect(key=key, journal=journal, name="live")
    def slow() -> str:
        started.set()
        release.wait(60)
        return "done"

    worker = threading.Thread(target=slow)
    worker.start()
    try:
        assert started.wait(60)
        with pytest.raises(EffectError, match="being attempted now"):
            journal.resolve(key, allow_retry=True)
    finally:
        release.set()
        worker.join(60)
    row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.COMPLETED


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"jitter": 2},
        {"initial_delay": -1},
        {"unknown_outcome": "maybe"},
        {"retry_on": (ValueError, "x")},
    ],
)
def test_an_invalid_retry_policy_is_a_named_error(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match="RetryPolicy"):
        RetryPolicy(**options)


# --- a result that cannot be stored ----------------------------------------------------------


def test_a_result_that_cannot_be_serialized_is_unknown_and_never_called_again(
    journal: EffectJournal, payments: Receiver
) -> None:
    key = new_key("lock")

    @effect(key=key, journal=journal, retry=FAST_IDEMPOTENT, name="payments.capture")
    def capture(idempotency_key: str = "") -> Any:
        post(payments.url, idempotency_key)
        return threading.Lock()  # acted, and now the result cannot be journaled

    with pytest.raises(EffectResultNotStoredError, match=r"'payments\.capture'") as raised:
        capture()
    assert "lock" in str(raised.value)
    row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.UNKNOWN
    assert row.error_type == RESULT_NOT_STORED
    # Even though the receiver honours keys, nothing calls it again without a decision.
    with pytest.raises(EffectOutcomeUnknown, match="result could not be stored"):
        capture()
    assert payments.requests == 1
    journal.resolve(key, completed={"id": 1})
    assert capture() == {"id": 1}
    assert payments.requests == 1


def test_a_reconcile_hook_may_settle_a_result_that_could_not_be_stored(
    journal: EffectJournal, payments: Receiver
) -> None:
    key = new_key("lock-rec")
    results: list[Any] = [threading.Lock()]

    def ask(idempotency_key: str) -> Reconciled:
        return Reconciled.completed({"id": acted(payments.url, idempotency_key)})

    @effect(key=key, journal=journal, reconcile=ask)
    def capture() -> Any:
        post(payments.url, key)
        return results.pop(0)

    with pytest.raises(EffectResultNotStoredError):
        capture()
    assert capture() == {"id": 1}
    assert payments.requests == 1


# --- a dead owner on this host, and short waits ----------------------------------------------

CLAIMER = """
import sys
from psycopg_pool import ConnectionPool
from langgraph_durable import EffectJournal
with ConnectionPool(sys.argv[1], kwargs={"autocommit": True}, open=True) as pool:
    from psycopg.rows import dict_row
    pool.kwargs["row_factory"] = dict_row
    journal = EffectJournal(pool)
    assert journal.claim(sys.argv[2], "zombie.send", sys.argv[3], 300, None) == 1
print("claimed", flush=True)
"""


def test_a_zombie_lease_owner_counts_as_dead(
    db_dsn: str, journal: EffectJournal, tmp_path: Path
) -> None:
    """The owner exited but its parent (this test) has not reaped it: it runs no code."""
    key = new_key("zombie")

    @effect(key=key, journal=journal, name="zombie.send", wait_timeout=0)
    def send() -> str:
        raise AssertionError("must not be called: the zombie may have sent it")

    digest = input_hash(journal.serde, "zombie.send", {})
    script = tmp_path / "claimer.py"
    script.write_text(CLAIMER)
    owner = subprocess.Popen(
        [sys.executable, str(script), db_dsn, key, digest], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "claimed"
        owner.stdout.close()
        # Wait for the exit without reaping: the process stays a zombie.
        os.waitid(os.P_PID, owner.pid, os.WEXITED | os.WNOWAIT)
        state = Path(f"/proc/{owner.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "Z"
        # wait_timeout=0: a live owner would make this EffectInProgressError at once.
        with pytest.raises(EffectOutcomeUnknown, match="never recorded an outcome"):
            send()
    finally:
        owner.wait()
    row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.UNKNOWN


def test_a_short_wait_timeout_gives_up_on_a_live_attempt(journal: EffectJournal) -> None:
    key = new_key("busy")
    started, release = threading.Event(), threading.Event()

    @effect(key=key, journal=journal, name="busy")
    def slow() -> str:
        started.set()
        release.wait(30)
        return "done"

    @effect(key=key, journal=journal, name="busy", wait_timeout=0.05)
    def impatient() -> str:
        raise AssertionError("must not be called")

    worker = threading.Thread(target=slow)
    worker.start()
    try:
        assert started.wait(30)
        with pytest.raises(EffectInProgressError, match=r"waited 0\.05s"):
            impatient()
    finally:
        release.set()
        worker.join(30)


# --- resolving by hand: one call shape, as documented ----------------------------------------


def dead_attempt(dsn: str, journal: EffectJournal, key: str, fn: Any) -> None:
    digest = input_hash(journal.serde, fn.__effect__.name, {})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO langgraph_durable_effects (key, effect_name, input_hash, status, "
            "attempt, lease_owner, lease_expires_at) VALUES (%s, %s, %s, 'running', 1, "
            "'elsewhere:1:1', now() - interval '1 second')",
            (key, fn.__effect__.name, digest),
        )


@pytest.mark.parametrize("result", ["receipt-7", None, {"id": 7}])
def test_resolve_completed_takes_the_result_alone(
    db_dsn: str, journal: EffectJournal, result: Any
) -> None:
    key = new_key("resolve")

    @effect(key=key, journal=journal, name="resolve.me")
    def charge() -> Any:
        raise AssertionError("must not be called")

    dead_attempt(db_dsn, journal, key, charge)
    journal.resolve(key, completed=result)
    assert charge() == result


def test_a_resolution_meant_for_an_earlier_attempt_is_refused(
    db_dsn: str, journal: EffectJournal
) -> None:
    """An operator checked the receiver for attempt 1 (its page left open); meanwhile
    attempt 2 ran and its outcome is unknown too. "It never acted" was true of attempt 1
    only: it must not let attempt 3 run after attempt 2, which may have acted."""
    key = new_key("resolve-stale")

    @effect(key=key, journal=journal, name="resolve.stale")
    def charge() -> Any:
        raise AssertionError("must not be called")

    dead_attempt(db_dsn, journal, key, charge)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("UPDATE langgraph_durable_effects SET attempt = 2 WHERE key = %s", (key,))
    for choice in ({"allow_retry": True}, {"completed": "receipt"}, {"failed": "declined"}):
        with pytest.raises(EffectError, match="at attempt 2 now, not at attempt 1"):
            journal.resolve(key, attempt=1, **choice)
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.RUNNING, 2)
    journal.resolve(key, attempt=2, completed="receipt")
    assert charge() == "receipt"


@pytest.mark.parametrize(
    "choice",
    [{}, {"completed": 1, "allow_retry": True}, {"failed": "x", "completed": None}],
)
def test_resolve_needs_exactly_one_choice_and_names_itself(
    db_dsn: str, journal: EffectJournal, choice: dict[str, Any]
) -> None:
    key = new_key("resolve-bad")
    with pytest.raises(EffectError, match=r"EffectJournal\.resolve\(key, \.\.\.\) needs exactly"):
        journal.resolve(key, **choice)


def test_resolve_of_an_unknown_key_says_where_to_look(journal: EffectJournal) -> None:
    with pytest.raises(EffectError, match="langgraph-durable effects"):
        journal.resolve(new_key("nothing"), allow_retry=True)


class YieldsBeforeStoring(AsyncEffectJournal):
    """Yields to the loop before storing a result, as a wait for a pooled connection does:
    a pending cancel is delivered there, before the statement is sent."""

    async def acomplete(self, *args: Any, **kwargs: Any) -> bool:
        await asyncio.sleep(0)
        return await super().acomplete(*args, **kwargs)


async def test_a_cancel_as_the_receiver_answers_still_stores_its_result(db_dsn: str) -> None:
    """A timeout firing as the receiver answers: the result is in hand, so it is stored
    before the cancel goes on; the key must not stay running (then read as unknown, and
    be attempted again) under this live process's lease."""
    key = new_key("cancelled-after")
    acted: list[int] = []
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        journal = YieldsBeforeStoring(saver.conn)  # type: ignore[arg-type]

        @effect(key=key, journal=journal, name="cancelled.after")
        async def charge() -> str:
            acted.append(1)
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # delivered at the runner's next await: the receiver has acted
            return "charged"

        with pytest.raises(asyncio.CancelledError):
            await charge()
        row = await journal.aget(key)
        assert row is not None
        assert row.status is EffectStatus.COMPLETED
        assert await charge() == "charged"  # a replay
    assert acted == [1]


class InterruptedOnce(EffectJournal):
    """Ctrl-C lands while the first result is being stored (before its statement)."""

    interrupted = False

    def complete(self, *args: Any, **kwargs: Any) -> bool:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return super().complete(*args, **kwargs)


def test_ctrl_c_as_the_result_is_stored_still_stores_it(saver: DurablePostgresSaver) -> None:
    assert isinstance(saver.conn, ConnectionPool)
    journal = InterruptedOnce(saver.conn)
    key = new_key("ctrl-c-after")
    acted: list[int] = []

    @effect(key=key, journal=journal, name="ctrl_c.after")
    def charge() -> str:
        acted.append(1)
        return "charged"

    with pytest.raises(KeyboardInterrupt):
        charge()
    row = journal.get(key)
    assert row is not None
    assert row.status is EffectStatus.COMPLETED
    assert charge() == "charged"
    assert acted == [1]


def test_a_cancelled_attempt_is_journaled_as_unknown_at_once(journal: EffectJournal) -> None:
    """An interrupted process (Ctrl-C) may have sent the request: unknown, not left running."""
    key = new_key("interrupted")

    @effect(key=key, journal=journal, name="interrupted")
    def send() -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        send()
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.error_type) == (EffectStatus.UNKNOWN, "KeyboardInterrupt")


# --- error texts Postgres cannot store, or that quote a password ---------------------------


class NotSent(Exception):
    """The policy below says nothing went out."""


class NoAnswer(Exception):
    """The policy below says the outcome is open."""


TEXT_POLICY = RetryPolicy(
    max_attempts=1, initial_delay=0.01, jitter=0, retry_on=(NotSent,), unknown_on=(NoAnswer,)
)
"""One attempt: a not-sent error leaves the key waiting to retry, at once."""


@pytest.mark.parametrize(
    ("error", "status", "first"),
    [
        (ValueError, EffectStatus.FAILED, ValueError),
        (NoAnswer, EffectStatus.UNKNOWN, EffectOutcomeUnknown),
        (NotSent, EffectStatus.RETRY_WAIT, NotSent),
    ],
)
@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("receiver said: bad\x00byte", "receiver said: bad\\x00byte"),
        ("file caf\udce9.txt refused", "file caf\\udce9.txt refused"),
    ],
)
def test_an_error_text_postgres_cannot_hold_is_journaled_escaped(
    journal: EffectJournal,
    error: type[Exception],
    status: EffectStatus,
    first: type[Exception],
    text: str,
    stored: str,
) -> None:
    """A NUL or a lone surrogate in the receiver's error: Postgres refused the write that
    records the attempt's end, the caller saw the driver's error instead of its own, and
    the attempt stayed running, then read as unknown though the receiver had refused."""
    key = new_key("text")

    @effect(key=key, journal=journal, retry=TEXT_POLICY)
    def call() -> str:
        raise error(text)

    with pytest.raises(first) as raised:
        call()
    assert error in (type(raised.value), type(raised.value.__cause__))
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.error_type, row.error_message) == (status, error.__name__, stored)


async def test_an_error_text_postgres_cannot_hold_is_journaled_escaped_async(
    db_dsn: str,
) -> None:
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        journal = AsyncEffectJournal(saver.conn)
        key = new_key("text-async")

        @effect(key=key, journal=journal, retry=TEXT_POLICY)
        async def call() -> str:
            raise ValueError("bad\x00byte")

        with pytest.raises(ValueError, match="bad"):
            await call()
        row = await journal.aget(key)
        assert row is not None
        assert (row.status, row.error_message) == (EffectStatus.FAILED, "bad\\x00byte")
        with pytest.raises(EffectFailedError, match=r"bad\\x00byte"):
            await call()


def test_an_error_whose_message_cannot_be_read_is_still_journaled(
    journal: EffectJournal,
) -> None:
    """Its `__str__` raised while the failure was being recorded: the row stayed running."""
    key = new_key("no-str")

    class Unreadable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    @effect(key=key, journal=journal, retry=TEXT_POLICY)
    def call() -> str:
        raise Unreadable

    with pytest.raises(Unreadable):
        call()
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.error_type) == (EffectStatus.FAILED, "Unreadable")
    assert row.error_message == "(its message could not be read: RuntimeError)"
    with pytest.raises(EffectFailedError, match="could not be read"):
        call()


@pytest.mark.parametrize(
    ("error", "first", "raised"),
    [
        (ValueError, ValueError, EffectFailedError),
        (NoAnswer, EffectOutcomeUnknown, EffectOutcomeUnknown),
    ],
)
def test_our_errors_and_logs_quoting_a_journaled_error_hide_its_password(
    journal: EffectJournal,
    caplog: pytest.LogCaptureFixture,
    error: type[Exception],
    first: type[Exception],
    raised: type[EffectError],
) -> None:
    """The journal keeps the receiver's text as written (the CLI and the console show it
    redacted); our own errors built from it, raised on every later call, and our logs
    hide the password, as every error of ours does."""
    key = new_key("secret")
    text = "POST https://svc:hunter2@crm.example.com/api refused"

    @effect(key=key, journal=journal, retry=TEXT_POLICY)
    def call() -> str:
        raise error(text)

    with caplog.at_level("INFO", logger="langgraph_durable"), pytest.raises(first) as raised_first:
        call()
    if first is not error:
        assert "hunter2" not in str(raised_first.value)
    with pytest.raises(raised) as later:
        call()
    assert "crm.example.com" in str(later.value)
    assert "hunter2" not in str(later.value)
    assert "hunter2" not in caplog.text
    row = journal.get(key)
    assert row is not None
    assert row.error_message == text


# --- stopped while the claim was under way ---------------------------------------------


async def test_a_call_cancelled_as_its_claim_commits_leaves_the_key_free(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel lands after the claim committed, before its reply was read: the key was
    left running until its lease ended, then read as unknown though nothing was sent."""
    async with AsyncDurablePostgresSaver.from_conn_string(db_dsn) as saver:
        await saver.setup()
        journal = AsyncEffectJournal(saver.conn)
        key = new_key("cancelled-claim")
        sent: list[str] = []

        @effect(key=key, journal=journal, retry=FAST)
        async def send() -> str:
            sent.append("mail")
            return "sent"

        claim = journal.aclaim

        async def claim_then_cancelled(*args: Any, **kwargs: Any) -> Any:
            await claim(*args, **kwargs)  # committed
            raise asyncio.CancelledError

        monkeypatch.setattr(journal, "aclaim", claim_then_cancelled)
        with pytest.raises(asyncio.CancelledError):
            await send()
        row = await journal.aget(key)
        assert row is not None
        assert (row.status, row.lease_owner) == (EffectStatus.RETRY_WAIT, None)
        assert sent == []
        monkeypatch.setattr(journal, "aclaim", claim)
        assert await send() == "sent"  # at once, not after the lease
        assert sent == ["mail"]


def test_a_call_interrupted_as_its_claim_returns_lets_go_of_its_own_claim_only(
    journal: EffectJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C as the claim's reply comes: the call lets go of the attempt if it holds it,
    never of one another call holds (its own claim found the key taken)."""
    key = new_key("interrupted-claim")

    @effect(key=key, journal=journal, retry=FAST)
    def send() -> str:
        return "sent"

    claim = journal.claim

    def claim_then_interrupted(*args: Any, **kwargs: Any) -> Any:
        claim(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(journal, "claim", claim_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        send()
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt) == (EffectStatus.RETRY_WAIT, 1)

    other = new_key("interrupted-claim-other")
    assert claim(other, "send", "0" * 32, 300.0, None, "another-call") == 1

    @effect(key=other, journal=journal, retry=FAST, name="send")
    def send_other() -> str:
        return "sent"

    with pytest.raises(KeyboardInterrupt):
        send_other()
    held = journal.get(other)
    assert held is not None
    assert (held.status, held.lease_owner) == (
        EffectStatus.RUNNING,
        journal.owner_of("another-call"),
    )


def test_an_interrupt_raised_inside_an_effect_releases_its_attempt(
    journal: EffectJournal,
) -> None:
    """Control flow, not a failure: the attempt is let go (whoever holds it) and the next
    call attempts at once."""
    key = new_key("interrupt-inside")
    asked: list[int] = []

    @effect(key=key, journal=journal, retry=FAST)
    def ask() -> str:
        asked.append(1)
        if len(asked) == 1:
            raise GraphInterrupt(())
        return "answered"

    with pytest.raises(GraphInterrupt):
        ask()
    row = journal.get(key)
    assert row is not None
    assert (row.status, row.attempt, row.lease_owner) == (EffectStatus.RETRY_WAIT, 1, None)
    assert ask() == "answered"
    assert asked == [1, 1]
