"""The relay's database rules: which failures it waits out, which it names and stops on.

A relay rides out outages (`run()` reconnects with a growing pause) and stops, with a
named error saying what to do, on what waiting will not cure. Pure decisions, no I/O.
"""

from __future__ import annotations

import psycopg

from langgraph_durable._db import is_disconnect
from langgraph_durable.errors import DurableError, OutboxRelayError, translate_driver_error

__all__ = ["lost", "lost_mid_round", "refused_for_good", "stopped_by"]

_REFUSED_FOR_GOOD = (
    "does not exist",  # database "x" / role "x" does not exist
    "authentication failed",  # password, SCRAM, ident, peer
    "no pg_hba.conf entry",
    "permission denied for database",
)
"""What a server's FATAL refusal at connect says when trying again will not help."""


def refused_for_good(exc: psycopg.OperationalError) -> bool:
    """Whether the server refused the connection for a reason no wait cures. libpq gives
    such a refusal no SQLSTATE, only the server's text (`FATAL:  database "x" does not
    exist`); "too many clients" or "starting up" are outages, not listed."""
    text = str(exc)
    return "FATAL:" in text and any(reason in text for reason in _REFUSED_FOR_GOOD)


def lost(exc: BaseException) -> bool:
    """Whether the relay's connection is gone, for a reason waiting may cure: a dead
    connection (`is_disconnect`), or a session the server ended for idling in a round's
    transaction beyond its limit (25P03: a relay that was frozen, or a publish that
    outlasted a lower limit the DBA set); the round's events stay pending."""
    return is_disconnect(exc) or getattr(exc, "sqlstate", None) == "25P03"


def stopped_by(exc: psycopg.Error | DurableError) -> DurableError:
    """The named error for a database error that ends `run()`: the CLI prints it as one
    line that says what to do, where a raw psycopg error gave a traceback."""
    if isinstance(exc, DurableError):
        return exc
    named = translate_driver_error(exc, doing="relaying outbox events")
    if named is not None:
        return named
    return OutboxRelayError(
        f"The outbox relay stopped on a database error: {exc.diag.message_primary or exc} "
        f"(SQLSTATE {exc.sqlstate or 'none'}). Events it had not marked published stay "
        "pending and go out again, under the same ids, once a relay runs: fix the cause "
        "(a read-only server or replica, a table changed by hand, a setting of the role or "
        "the database) and start the relay again."
    )


def lost_mid_round(exc: BaseException) -> str:
    """What `run_once()` says when its connection died during the round."""
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    return (
        f"The outbox relay lost its database connection during a round ({reason}): events "
        "it had not marked published stay pending and go out again, under the same ids. "
        "Call run_once() again once the database is back, or use run(), which waits "
        "outages out."
    )
