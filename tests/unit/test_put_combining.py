"""Puts that go together (`checkpoint/_combining.py`): the statement's parameters, which
puts may share one, and the coordination of both flavours, with stores that record what
they were given (the database side is in tests/integration/test_combined_puts.py)."""

from __future__ import annotations

import asyncio
import collections
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from put_params import put_params

from langgraph_durable._sql import (
    PSYCOPG_CACHED_QUERY_BYTES,
    PSYCOPG_CACHED_QUERY_PARAMS,
    parameter_names,
)
from langgraph_durable.checkpoint import _combining
from langgraph_durable.checkpoint._combining import (
    MAX_BATCH,
    MAX_PUT_BYTES,
    AsyncPutCombiner,
    PutCombiner,
    combined,
    fits,
    take_batch,
)
from langgraph_durable.errors import DatabaseUnreachableError, PoolTimeoutError


def put(
    thread: str, checkpoint: str = "c1", blobs: int = 0, writes: int = 0, **flags: Any
) -> dict[str, Any]:
    """One checkpoint's parameters, every row marked with its thread."""
    return put_params(
        blobs,
        writes,
        thread_id=thread,
        checkpoint_ns=f"ns-{thread}",
        checkpoint_id=checkpoint,
        checkpoint=f'{{"id": "{checkpoint}"}}',
        channels=[f"{thread}-c{i}" for i in range(blobs)],
        blobs=[f"{thread}-b{i}".encode() for i in range(blobs)],
        w_task_ids=[f"{thread}-task{i}" for i in range(writes)],
        w_blobs=[f"{thread}-wb{i}".encode() for i in range(writes)],
        **flags,
    )


def test_every_row_of_a_combined_statement_names_its_own_thread() -> None:
    batch = [put("a", blobs=2, writes=1), put("b"), put("c", blobs=1, writes=3)]
    query, args = combined(batch)
    assert args["thread_ids"] == ["a", "b", "c"]
    assert args["checkpoint_nss"] == ["ns-a", "ns-b", "ns-c"]
    assert args["checkpoints"] == [p["checkpoint"] for p in batch]
    assert args["b_thread_ids"] == ["a", "a", "c"]
    assert args["b_checkpoint_nss"] == ["ns-a", "ns-a", "ns-c"]
    assert args["blobs"] == [b"a-b0", b"a-b1", b"c-b0"]
    assert args["w_thread_ids"] == ["a", "c", "c", "c"]
    assert args["w_task_ids"] == ["a-task0", "c-task0", "c-task1", "c-task2"]
    assert args["w_idxs"] == [0, 0, 1, 2]
    assert set(args) == set(parameter_names(query))


@pytest.mark.parametrize("blobs", [0, 1])
@pytest.mark.parametrize("writes", [0, 1])
def test_a_combined_statement_has_only_the_blocks_its_rows_need(blobs: int, writes: int) -> None:
    query, args = combined([put("a", blobs=blobs, writes=writes), put("b")])
    assert ("new_blobs AS" in query) == bool(blobs)
    assert ("parked_writes AS" in query) == bool(writes)
    assert len(query.encode()) <= PSYCOPG_CACHED_QUERY_BYTES
    assert len(args) <= PSYCOPG_CACHED_QUERY_PARAMS
    assert "--" not in query


def test_only_small_puts_without_a_fence_progress_or_events_go_together() -> None:
    assert fits(put("a", blobs=2, writes=2))
    assert not fits(put("a", fence_token=3))
    assert not fits(put("a", run_id="run"))
    assert not fits(put("a", e_ids=["e"]))
    large = put("a")
    large["blobs"] = [b"x" * (MAX_PUT_BYTES // 2)]
    assert fits(large)
    large["w_blobs"] = large["blobs"]  # half and half, with the checkpoint's JSON: too large
    assert not fits(large)
    large = put("a")
    large["checkpoint"] = "x" * (MAX_PUT_BYTES + 1)
    assert not fits(large)


def test_a_batch_takes_the_oldest_puts_and_never_one_checkpoint_twice() -> None:
    waiting: collections.deque[tuple[dict[str, Any], Any]] = collections.deque()
    entries = [(put("a", "1"), 1), (put("a", "1"), 2), (put("b", "1"), 3), (put("a", "2"), 4)]
    waiting.extend(entries)
    # The repeat waits for the next batch, and so does the later put of its thread.
    assert [tag for _, tag in take_batch(waiting)] == [1, 3]
    assert [tag for _, tag in take_batch(waiting)] == [2, 4]
    assert take_batch(waiting) == []
    waiting.extend((put(f"t{i}"), i) for i in range(MAX_BATCH + 3))
    assert len(take_batch(waiting)) == MAX_BATCH
    assert [tag for _, tag in take_batch(waiting)] == [MAX_BATCH, MAX_BATCH + 1, MAX_BATCH + 2]
    # A put that cannot share goes alone in its turn, and is not taken into a batch.
    waiting.extend([(put("f", fence_token=1), "f"), (put("y"), "y")])
    assert [tag for _, tag in take_batch(waiting)] == ["f"]
    assert [tag for _, tag in take_batch(waiting)] == ["y"]
    waiting.extend([(put("y"), 1), (put("f", fence_token=1), 2), (put("z"), 3)])
    assert [tag for _, tag in take_batch(waiting)] == [1, 3]
    assert [tag for _, tag in take_batch(waiting)] == [2]
    # Nor is a thread's later put taken ahead of its earlier one left behind.
    large = put("t", "c1")
    large["checkpoint"] = "x" * (MAX_PUT_BYTES + 1)
    waiting.extend([(put("x"), 1), (large, 2), (put("t", "c2"), 3)])
    assert [tag for _, tag in take_batch(waiting)] == [1]
    assert [tag for _, tag in take_batch(waiting)] == [2]
    assert [tag for _, tag in take_batch(waiting)] == [3]


HANG_S = 60.0
"""Bounds joins that only guard against a hang; a correct run never waits it out."""


class Slots:
    """One statement slot; a put may wait `wait_timeout` for it."""

    def __init__(self, wait_timeout: float | None = None, capacity: int = 1) -> None:
        self.wait_timeout = wait_timeout
        self.capacity = capacity

    def timed_out(self) -> Exception:
        return PoolTimeoutError("no slot within the pool's timeout")


class Stores:
    """What a combiner stored, alone and together; `fail` names threads that fail."""

    def __init__(self, fail: Sequence[str] = ()) -> None:
        self.alone: list[str] = []
        self.together: list[list[str]] = []
        self.fail = set(fail)

    def one(self, params: dict[str, Any]) -> None:
        if params["thread_id"] in self.fail:
            raise ValueError(f"refused {params['thread_id']}")
        self.alone.append(params["thread_id"])

    def many(self, batch: Sequence[dict[str, Any]]) -> None:
        threads = [params["thread_id"] for params in batch]
        if self.fail & set(threads):
            raise ValueError("refused a batch")
        self.together.append(threads)


async def slot_held_by_first(
    stores: Stores, release: asyncio.Event, slots: Slots | None = None
) -> tuple[AsyncPutCombiner, asyncio.Task[None]]:
    """A combiner of one slot (`slots`, default `Slots()`), held by the put of thread
    "first" until `release`."""

    async def one(params: dict[str, Any]) -> None:
        if params["thread_id"] == "first":
            await release.wait()
        stores.one(params)

    async def many(batch: Sequence[dict[str, Any]]) -> None:
        stores.many(batch)

    combiner = AsyncPutCombiner(slots or Slots(), one, many)
    first = asyncio.create_task(combiner.store(put("first")))
    await asyncio.sleep(0)
    return combiner, first


async def test_async_puts_go_alone_while_a_slot_is_free_and_together_while_none_is() -> None:
    stores, release = Stores(), asyncio.Event()
    combiner, first = await slot_held_by_first(stores, release)
    rest = [asyncio.create_task(combiner.store(put(f"t{i}"))) for i in range(5)]
    fenced = asyncio.create_task(combiner.store(put("fenced", fence_token=1)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert stores.alone == []
    release.set()
    await asyncio.gather(first, fenced, *rest)
    assert stores.alone == ["first", "fenced"]  # a put that cannot share goes alone
    assert stores.together == [[f"t{i}" for i in range(5)]]
    await combiner.store(put("later"))  # the slot is free again
    assert stores.alone[-1] == "later"


async def test_async_puts_that_fit_go_one_statement_at_a_time_while_slots_are_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Group commit: while a statement carrying puts that fit is under way, the next such
    puts wait for it, with three of four slots free, and then go together; a put that
    cannot share a statement goes at once while none waits, and in its turn behind them."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", HANG_S)
    stores, release = Stores(), asyncio.Event()
    slots = Slots(capacity=4)
    combiner, first = await slot_held_by_first(stores, release, slots)
    fenced = asyncio.create_task(combiner.store(put("fenced", fence_token=1)))
    await asyncio.wait_for(fenced, HANG_S)  # beside the lane, at once
    assert stores.alone == ["fenced"]
    rest = [asyncio.create_task(combiner.store(put(f"t{i}"))) for i in range(5)]
    behind = asyncio.create_task(combiner.store(put("behind", fence_token=1)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert combiner.waiting == 6
    release.set()
    await asyncio.wait_for(asyncio.gather(first, behind, *rest), HANG_S)
    assert stores.alone == ["fenced", "first", "behind"]
    assert stores.together == [[f"t{i}" for i in range(5)]]


async def test_async_puts_wait_for_the_lane_no_longer_than_lane_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lane's statement that does not end (a put alone waiting on a row lock) holds the
    puts that fit up for `LANE_WAIT_S` only: then they go beside it, on a free slot."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", 0.01)
    stores, release = Stores(), asyncio.Event()
    slots = Slots(capacity=2)
    combiner, first = await slot_held_by_first(stores, release, slots)
    rest = [asyncio.create_task(combiner.store(put(f"t{i}"))) for i in range(3)]
    await asyncio.wait_for(asyncio.gather(*rest), HANG_S)
    assert not first.done()
    assert stores.together == [["t0", "t1", "t2"]]
    release.set()
    await asyncio.wait_for(first, HANG_S)
    later = asyncio.create_task(combiner.store(put("later")))
    await asyncio.sleep(0)
    assert later.done()  # the lane is free again: stored alone at once
    assert stores.alone == ["first", "later"]


async def test_async_the_lane_wait_starts_again_with_each_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait for the lane is counted per statement of its holder: a flusher storing
    batch after batch, each quick, keeps its lane however long it goes on."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", HANG_S)
    stores, release = Stores(), asyncio.Event()
    in_batch, batch_release = asyncio.Event(), asyncio.Event()

    async def one(params: dict[str, Any]) -> None:
        if params["thread_id"] == "first":
            await release.wait()
        stores.one(params)

    async def many(batch: Sequence[dict[str, Any]]) -> None:
        in_batch.set()
        await batch_release.wait()
        stores.many(batch)

    slots = Slots(capacity=4)
    combiner = AsyncPutCombiner(slots, one, many)
    first = asyncio.create_task(combiner.store(put("first")))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(combiner.store(put(name))) for name in ("a", "b")]
    await asyncio.sleep(0)
    timer = combiner._lane_timer
    assert timer is not None  # "a" and "b" wait for the lane's statement
    release.set()
    await asyncio.wait_for(in_batch.wait(), HANG_S)  # "a" and "b" in the flusher's statement
    assert combiner.waiting == 0
    assert timer.cancelled()
    assert combiner._lane_timer is None  # nobody waits for the new statement yet
    more = [asyncio.create_task(combiner.store(put(name))) for name in ("c", "d")]
    await asyncio.sleep(0)
    assert combiner._lane_timer is not None
    assert combiner._lane_timer is not timer
    batch_release.set()
    await asyncio.wait_for(asyncio.gather(first, *waiting, *more), HANG_S)
    assert stores.together == [["a", "b"], ["c", "d"]]


async def test_async_a_failed_batch_is_stored_one_by_one_each_with_its_own_outcome() -> None:
    stores, release = Stores(fail=["bad"]), asyncio.Event()
    combiner, first = await slot_held_by_first(stores, release)
    names = ["a", "bad", "b"]
    waiting = [asyncio.create_task(combiner.store(put(name))) for name in names]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(first, *waiting, return_exceptions=True)
    assert results[0] is None
    assert results[1] is None
    assert results[3] is None
    assert isinstance(results[2], ValueError)
    assert "refused bad" in str(results[2])
    assert stores.together == []
    assert sorted(stores.alone) == ["a", "b", "first"]  # each by its own caller


async def test_async_a_put_cancelled_while_it_waits_is_not_stored() -> None:
    stores, release = Stores(), asyncio.Event()
    combiner, first = await slot_held_by_first(stores, release)
    gone = asyncio.create_task(combiner.store(put("gone")))
    kept = [asyncio.create_task(combiner.store(put(name))) for name in ("a", "b")]
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    await asyncio.gather(first, *kept)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert stores.together == [["a", "b"]]
    assert "gone" not in stores.alone


def start_storing(combiner: PutCombiner, params: dict[str, Any]) -> threading.Thread:
    """A thread storing `params` through `combiner`, started."""
    # A daemon: a failed assertion that leaves it waiting must not keep pytest from exiting.
    thread = threading.Thread(target=combiner.store, args=(params,), daemon=True)
    thread.start()
    return thread


def joined(*threads: threading.Thread) -> bool:
    for thread in threads:
        thread.join(HANG_S)
    return not any(thread.is_alive() for thread in threads)


def queued(combiner: PutCombiner, count: int) -> bool:
    """Whether `count` puts come to wait in `combiner`'s queue (False after `HANG_S`)."""
    deadline = time.monotonic() + HANG_S
    while combiner.waiting < count:
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.001)
    return True


class FirstHolds:
    """A `store_one` that holds the only slot while it stores thread "first"'s put: it
    sets `busy`, waits for `release`, then passes the put on to `store` like any other."""

    def __init__(self, store: Callable[[dict[str, Any]], None]) -> None:
        self.store = store
        self.busy, self.release = threading.Event(), threading.Event()

    def __call__(self, params: dict[str, Any]) -> None:
        if params["thread_id"] == "first":
            self.busy.set()
            self.release.wait()
        self.store(params)


def held_by_first(stores: Stores, slots: Slots) -> tuple[PutCombiner, FirstHolds]:
    """A threads' combiner on `slots` whose put of thread "first" holds its statement until
    released (`FirstHolds`); what it stores goes to `stores`, one thread at a time."""
    lock = threading.Lock()

    def store_one(params: dict[str, Any]) -> None:
        with lock:
            stores.one(params)

    def many(batch: Sequence[dict[str, Any]]) -> None:
        with lock:
            stores.many(batch)

    one = FirstHolds(store_one)
    return PutCombiner(slots, one, many), one


def while_first_holds_the_slot(
    combiner: PutCombiner, one: FirstHolds, names: list[str]
) -> dict[str, BaseException]:
    """A put of thread "first" (stored by `one`) holds the only slot while one put per
    name queues; then the slot is freed. What each raised."""
    raised: dict[str, BaseException] = {}

    def store(name: str) -> None:
        try:
            combiner.store(put(name))
        except BaseException as exc:
            raised[name] = exc

    one.busy.clear()
    one.release.clear()
    first = threading.Thread(target=store, args=("first",))
    first.start()
    one.busy.wait()
    others = [threading.Thread(target=store, args=(name,)) for name in names]
    for thread in others:
        thread.start()
    waited = queued(combiner, len(names))  # every other put waits for the slot
    one.release.set()
    assert waited
    for thread in [first, *others]:
        thread.join(HANG_S)
        assert not thread.is_alive()
    return raised


def test_threads_waiting_for_a_slot_are_stored_together_by_one_of_them() -> None:
    stores = Stores(fail=["bad"])
    combiner, one = held_by_first(stores, Slots())

    names = [f"t{i}" for i in range(6)]
    errors = while_first_holds_the_slot(combiner, one, names)
    assert errors == {}
    assert stores.alone == ["first"]
    assert [sorted(batch) for batch in stores.together] == [sorted(names)]

    # A batch that fails is stored one by one: only the bad put raises.
    errors = while_first_holds_the_slot(combiner, one, ["a", "bad", "b"])
    assert set(errors) == {"bad"}
    assert sorted(stores.alone[1:]) == ["a", "b", "first"]
    assert combiner.waiting == 0


async def test_async_in_an_outage_every_put_of_the_batch_fails_with_its_own_error() -> None:
    stores, release = Stores(), asyncio.Event()
    combiner, first = await slot_held_by_first(stores, release)
    refused = DatabaseUnreachableError("the server cannot be reached")

    async def unreachable(batch: Sequence[dict[str, Any]]) -> None:
        raise refused

    combiner._store_many = unreachable  # type: ignore[method-assign]
    waiting = [asyncio.create_task(combiner.store(put(name))) for name in ("a", "b", "c")]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    await first
    assert stores.alone == ["first"]  # not tried again one by one: each would wait again
    for result in results:
        assert isinstance(result, DatabaseUnreachableError)
        assert result is not refused
        assert result.__cause__ is refused
    assert len({id(result) for result in results}) == 3


def test_a_thread_interrupted_while_it_waits_leaves_nothing_behind() -> None:
    """Ctrl-C in a put waiting for the slot: the put leaves the queue, and the puts after
    it are still stored (a waiter left behind would have taken the slot for good)."""
    stores = Stores()
    one = FirstHolds(stores.one)
    combiner = PutCombiner(Slots(), one, stores.many)
    first = threading.Thread(target=combiner.store, args=(put("first"),))
    first.start()
    one.busy.wait()

    class Interrupted(BaseException):
        pass

    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted

    main = threading.get_ident()

    def interrupt_main_once_it_waits() -> None:
        while combiner.waiting < 1:
            threading.Event().wait(0.001)
        signal.pthread_kill(main, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        threading.Thread(target=interrupt_main_once_it_waits).start()
        with pytest.raises(Interrupted):
            combiner.store(put("main"))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert combiner.waiting == 0
    later = [threading.Thread(target=combiner.store, args=(put(f"t{i}"),)) for i in range(2)]
    for thread in later:
        thread.start()
    while combiner.waiting < 2:
        threading.Event().wait(0.001)
    one.release.set()
    for thread in [first, *later]:
        thread.join(HANG_S)
        assert not thread.is_alive()
    assert [sorted(batch) for batch in stores.together] == [["t0", "t1"]]
    assert "main" not in stores.alone
    combiner.store(put("after"))  # the slot is free: stored alone at once
    assert stores.alone[-1] == "after"


async def test_async_a_waiting_put_is_served_before_unshareable_puts_that_came_after() -> None:
    """Puts that cannot share a statement queue too, in their turn: going ahead of the
    queue, a flow of them could keep every slot taken and starve it."""
    stores, release = Stores(), asyncio.Event()
    combiner, first = await slot_held_by_first(stores, release)
    plain = asyncio.create_task(combiner.store(put("plain")))
    await asyncio.sleep(0)
    fenced = asyncio.create_task(combiner.store(put("fenced", fence_token=1)))
    await asyncio.sleep(0)
    assert combiner.waiting == 2  # the fenced put waits too, behind the plain one
    release.set()
    await asyncio.gather(first, plain, fenced)
    assert stores.alone == ["first", "plain", "fenced"]


def test_threads_interrupted_leader_lets_every_other_put_store_its_own() -> None:
    """The thread storing a batch is interrupted midway: whether the batch committed is
    unknown, so each other thread stores its put alone (storing one twice changes
    nothing); none returns as stored without it."""
    stores = Stores()
    one = FirstHolds(stores.one)

    class Interrupted(BaseException):
        pass

    def many(batch: Sequence[dict[str, Any]]) -> None:
        raise Interrupted

    combiner = PutCombiner(Slots(), one, many)
    names = ["a", "b", "c"]
    raised = while_first_holds_the_slot(combiner, one, names)
    assert list(raised) == [name for name in names if name in raised]
    assert len(raised) == 1  # the leader, whichever thread it was
    assert isinstance(next(iter(raised.values())), Interrupted)
    stored_alone = set(stores.alone) - {"first"}
    assert stored_alone == set(names) - set(raised)
    assert combiner._lane is None  # the interrupted leader gave the lane back


async def test_async_a_put_waits_in_the_queue_no_longer_than_for_a_connection() -> None:
    """The pool's timeout bounds the wait for a statement slot as it bounds the wait for
    a connection: past it the put leaves the queue with the pool's error, unwritten."""
    stores, release = Stores(), asyncio.Event()
    combiner, first = await slot_held_by_first(stores, release, Slots(wait_timeout=0.01))
    with pytest.raises(PoolTimeoutError):
        await combiner.store(put("late"))
    assert combiner.waiting == 0
    release.set()
    await first
    assert stores.alone == ["first"]


async def test_async_a_put_leaves_in_time_when_the_pool_timeout_was_lowered_meanwhile() -> None:
    """The queue has one timer, for its earliest deadline: a put that came later with a
    shorter timeout (the pool's was lowered) still leaves the queue when its own ends."""
    stores, release = Stores(), asyncio.Event()
    slots = Slots(wait_timeout=100 * HANG_S)
    combiner, first = await slot_held_by_first(stores, release, slots)
    patient = asyncio.create_task(combiner.store(put("patient")))
    await asyncio.sleep(0)
    slots.wait_timeout = 0.01
    with pytest.raises(PoolTimeoutError):
        await asyncio.wait_for(combiner.store(put("late")), HANG_S)
    assert combiner.waiting == 1  # the patient put waits on
    release.set()
    await asyncio.gather(first, patient)
    assert stores.alone == ["first", "patient"]


def test_threads_a_put_waits_in_the_queue_no_longer_than_for_a_connection() -> None:
    stores = Stores()
    one = FirstHolds(stores.one)
    combiner = PutCombiner(Slots(wait_timeout=0.01), one, stores.many)
    first = threading.Thread(target=combiner.store, args=(put("first"),))
    first.start()
    one.busy.wait()
    with pytest.raises(PoolTimeoutError):
        combiner.store(put("late"))
    assert combiner.waiting == 0
    one.release.set()
    first.join(HANG_S)
    assert not first.is_alive()
    assert stores.alone == ["first"]
    combiner.store(put("after"))  # the slot was given back
    assert stores.alone[-1] == "after"


def test_threads_puts_that_fit_go_one_statement_at_a_time_while_slots_are_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The threads' lane, as the async one: while a put that fits is stored, the next ones
    wait for it with three of four slots free and then go together; a put that cannot
    share a statement goes at once while none waits, and in its turn behind them."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", HANG_S)
    stores = Stores()
    combiner, one = held_by_first(stores, Slots(capacity=4))
    first = start_storing(combiner, put("first"))
    one.busy.wait()
    combiner.store(put("fenced", fence_token=1))  # beside the lane, at once
    assert stores.alone == ["fenced"]
    rest = [start_storing(combiner, put(f"t{i}")) for i in range(5)]
    waited = queued(combiner, 5)  # with three slots free
    behind = start_storing(combiner, put("behind", fence_token=1))
    waited = waited and queued(combiner, 6)
    one.release.set()
    assert waited
    assert joined(first, behind, *rest)
    assert combiner._lane is None  # given back by the batch's leader
    assert stores.alone[:2] == ["fenced", "first"]
    assert sorted(stores.alone[2:]) == ["behind"]
    assert [sorted(batch) for batch in stores.together] == [[f"t{i}" for i in range(5)]]
    combiner.store(put("later"))  # the lane was given back: stored alone at once
    assert stores.alone[-1] == "later"
    assert combiner.waiting == 0


def test_threads_puts_wait_for_the_lane_no_longer_than_lane_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lane's statement that does not end (a put alone waiting on a row lock) holds the
    puts that fit up for `LANE_WAIT_S` only: then they are stored beside it, on a free
    slot, while it still goes on; once it ends the lane is free again."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", 0.01)
    stores = Stores()
    combiner, one = held_by_first(stores, Slots(capacity=2))
    first = start_storing(combiner, put("first"))
    one.busy.wait()
    rest = [start_storing(combiner, put(f"t{i}")) for i in range(3)]
    try:
        assert joined(*rest)  # stored while "first" still holds its statement
        assert first.is_alive()
    finally:
        one.release.set()
    stored = [name for batch in stores.together for name in batch] + stores.alone
    assert sorted(stored) == ["t0", "t1", "t2"]
    assert joined(first)
    assert combiner._lane is None
    combiner.store(put("later"))
    assert stores.alone[-1] == "later"
    assert combiner.waiting == 0


def test_threads_a_put_whose_batch_failed_never_holds_the_lane(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The puts of a failed batch are stored one by one beside the lane: the lane stays
    with whoever holds it, and is free once they are done."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", HANG_S)
    stores = Stores(fail=["bad"])
    combiner, one = held_by_first(stores, Slots(capacity=4))
    errors = while_first_holds_the_slot(combiner, one, ["a", "bad", "b"])
    assert set(errors) == {"bad"}
    assert sorted(stores.alone) == ["a", "b", "first"]
    assert combiner._lane is None
    combiner.store(put("later"))
    assert stores.alone[-1] == "later"


def test_threads_a_put_waits_for_the_lane_no_longer_than_for_a_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With slots free, a put that fits waiting for the lane still leaves the queue with
    the pool's error once the pool's timeout is up, unwritten, and holds nobody up."""
    monkeypatch.setattr(_combining, "LANE_WAIT_S", HANG_S)
    stores = Stores()
    one = FirstHolds(stores.one)
    slots = Slots(wait_timeout=0.01, capacity=2)
    combiner = PutCombiner(slots, one, stores.many)
    first = start_storing(combiner, put("first"))
    one.busy.wait()
    try:
        with pytest.raises(PoolTimeoutError):
            combiner.store(put("late"))
        assert combiner.waiting == 0
    finally:
        one.release.set()
    assert joined(first)
    assert stores.alone == ["first"]
    combiner.store(put("after"))
    assert stores.alone[-1] == "after"
