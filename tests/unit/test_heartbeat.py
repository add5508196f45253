"""The sync heartbeat: a stopped one holds nothing of its call.

Its queue entry stays until it is due (a third of a lease: 100 s by default) or swept, so
whatever `beat` refers to (an effect call's arguments, a model call's prompt, the journal)
would stay alive that long after the call returned.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

from pydantic import BaseModel

from langgraph_durable import effect
from langgraph_durable._db import AsyncHeartbeat, Heartbeat
from langgraph_durable.effects._memory import MemoryEffectJournal


class _Payload:
    """Stands for a call's arguments: something only `beat` refers to."""


class _Prompt(BaseModel):
    """An effect's argument (serializable, as effects' arguments must be)."""

    text: str


def test_a_stopped_heartbeat_lets_go_of_its_beat() -> None:
    payload = _Payload()
    gone = weakref.ref(payload)

    def beat(held: _Payload = payload) -> None:
        assert held is not None

    with Heartbeat(beat, 100.0, "a call").running():
        pass
    del payload, beat
    gc.collect()
    assert gone() is None, "a stopped heartbeat's queue entry still holds its call"


def test_a_beat_due_after_the_call_ended_does_nothing() -> None:
    beats: list[int] = []
    heartbeat = Heartbeat(lambda: beats.append(1), 100.0, "a call")
    with heartbeat.running():
        heartbeat.beat()  # as the lease thread does while the call runs
    heartbeat.beat()  # the lease thread found it due just as the call ended
    assert beats == [1]


def test_a_running_heartbeat_beats() -> None:
    beaten = threading.Event()
    with Heartbeat(beaten.set, 0.001, "a call").running():
        assert beaten.wait(timeout=60)


def test_a_finished_effect_call_holds_nothing_of_its_arguments() -> None:
    """The effect's heartbeat `beat` refers to the call: its arguments (a prompt, a
    payload) must not outlive it by a third of a lease."""

    @effect(name="send", key=lambda payload: "k", journal=MemoryEffectJournal())
    def send(payload: _Prompt) -> str:
        return "sent"

    payload = _Prompt(text="a long prompt")
    gone = weakref.ref(payload)
    assert send(payload) == "sent"
    del payload
    gc.collect()
    assert gone() is None, "a finished effect call's arguments are still held"


async def test_an_async_beat_that_swallows_its_cancellation_is_not_armed_again() -> None:
    """A beat under way when the block ends is cancelled; one that turns the cancellation
    into an error of its own must not start the heartbeat over after the call."""
    started = asyncio.Event()
    beats = 0

    async def beat() -> None:
        nonlocal beats
        beats += 1
        started.set()
        try:
            await asyncio.Event().wait()  # a statement under way
        except asyncio.CancelledError:
            raise RuntimeError("connection closed") from None

    # Every 0 s: a re-armed timer fires at the loop's next turn, no clock involved.
    async with AsyncHeartbeat(beat, 0.0, "a call").running():
        await started.wait()
    for _ in range(100):  # turns of the loop in which a re-armed heartbeat would beat
        await asyncio.sleep(0)
    assert beats == 1
