"""`run_relay`: a relay run from sync code until Ctrl-C or SIGTERM, its publisher closed
after."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
from typing import Any

from langgraph_durable.embedded import stops_servers_on_sigterm
from langgraph_durable.outbox._base import error_text
from langgraph_durable.outbox._relay import OutboxRelay

__all__ = ["run_relay"]

logger = logging.getLogger("langgraph_durable.outbox")


CANCEL_AGAIN_AFTER = 1.0
"""Seconds between cancellations of a relay asked to stop by Ctrl-C, until it has."""


def run_relay(relay: OutboxRelay) -> None:
    """Run a relay from sync code until interrupted (Ctrl-C, or SIGTERM while it has
    Python's default handler), then close its publisher
    (its `aclose()`, if it has one) in the same event loop: the loop ends here, and a
    broker connection left open printed the client's errors as the process exited."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run_until_interrupted(relay))


async def _run_until_interrupted(relay: OutboxRelay) -> None:
    """`relay.run()` until Ctrl-C (SIGINT) asks it to stop.

    `asyncio.run` cancels the task once per Ctrl-C, and a cancellation can be lost (on
    Python 3.11 `asyncio.wait_for` drops one that arrives just as the call it waits for
    returns); a relay in CI went on running after Ctrl-C. Here Ctrl-C also sets the relay's
    `stop`, which it checks after every round and before it waits, and the task is
    cancelled again every `CANCEL_AGAIN_AFTER` seconds until it has ended.
    """
    stop = asyncio.Event()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    running = True

    def cancel_until_done() -> None:
        if running and task is not None and not task.done():
            task.cancel()
            loop.call_later(CANCEL_AGAIN_AFTER, cancel_until_done)

    def interrupted() -> None:
        stop.set()
        cancel_until_done()

    # SIGTERM (`docker stop`, systemd) too, while it has Python's default, which ended
    # the process mid-round with the publisher's connection open, or the embedded
    # Postgres's (it only stops its servers, which stop at exit anyway); a handler of the
    # application's own is left alone.
    signals = [signal.SIGINT]
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    current = previous[signal.SIGTERM]
    if current is signal.SIG_DFL or stops_servers_on_sigterm(current):
        signals.append(signal.SIGTERM)
    handled: list[signal.Signals] = []
    try:
        for signum in signals:
            loop.add_signal_handler(signum, interrupted)
            handled.append(signum)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # not the main thread, or no signals in this loop: Ctrl-C as before
    try:
        await relay.run(stop)
    except asyncio.CancelledError:
        if not stop.is_set():
            raise  # cancelled by something else than Ctrl-C
    finally:
        running = False  # no more cancelling: the publisher closes next
        try:
            await _close_publisher(relay.publisher)
        finally:
            for signum in handled:
                loop.remove_signal_handler(signum)  # which sets SIG_DFL: put back
                signal.signal(signum, previous[signum])  # what was there (embedded's)


CLOSE_PUBLISHER_WITHIN = 10.0
"""Seconds `run_relay` gives a publisher to close once the relay has stopped."""


async def _close_publisher(publisher: Any) -> None:
    """`publisher.aclose()`, if it has one, to its end: a Ctrl-C that came as the relay
    stopped (a cancellation still pending) does not cut it short."""
    aclose = getattr(publisher, "aclose", None)
    if not inspect.iscoroutinefunction(aclose):
        return
    closing = asyncio.ensure_future(asyncio.wait_for(aclose(), CLOSE_PUBLISHER_WITHIN))
    while not closing.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(closing)
    error = None if closing.cancelled() else closing.exception()
    if error is not None:
        logger.warning("outbox relay: closing the publisher failed: %s", error_text(error))
