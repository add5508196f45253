"""A worker whose own clock is off (NTP drift, a paused VM), for tests of what must be timed
by the database's clock instead.

`skew_worker_clock(monkeypatch, by)` makes `datetime.now()` run `by` ahead (behind, if
negative) in the modules of this package that a worker's time could leak from; the
database's clock, and every other module, keep the right time.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import pytest

from langgraph_durable.runs import _model, _sleep

MODULES = (_sleep, _model)
"""The modules whose `datetime` is replaced: where a sleep's times are made, and where a
worker turns how a run ended into what the registry stores."""


class _RealDatetimes(type):
    """`isinstance(value, Skewed)` holds for every datetime, as for the class it replaces."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, datetime)


def skew_worker_clock(monkeypatch: pytest.MonkeyPatch, by: timedelta) -> None:
    """This process's clock runs `by` off the database's, in the modules in `MODULES`."""

    class Skewed(datetime, metaclass=_RealDatetimes):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> datetime:
            return datetime.now(tz) + by

    for module in MODULES:
        monkeypatch.setattr(module, "datetime", Skewed)
