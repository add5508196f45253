"""Spans and metrics through the OpenTelemetry API, when it is installed (the `telemetry`
extra); nothing at all when it is not.

We only emit: the application configures the SDK (exporters, sampling), as OpenTelemetry
asks libraries to do. Without a configured SDK the API's calls are no-ops, so the cost is
a function call per span. Every span and measurement carries the ids an operator searches
by: run, thread and effect key.

Spans: `langgraph_durable.run` (one execution of a run by a worker),
`langgraph_durable.step` (a checkpoint committed), `langgraph_durable.effect` (a call of an
effect, replayed or attempted). Metrics: `langgraph_durable.effect.calls` (by effect and
outcome: completed, replayed, reconciled, failed, unknown, deferred),
`langgraph_durable.tokens.saved` (tokens of model calls replayed instead of paid again),
`langgraph_durable.runs.finished` (by graph and status), `langgraph_durable.runs.stuck`
(runs flagged stuck), `langgraph_durable.run.recovery` (seconds from a dead worker's last
heartbeat to another worker taking its run), `langgraph_durable.outbox.backlog` and
`langgraph_durable.outbox.oldest_pending_age` (gauges a relay sets whenever it has caught
up), `langgraph_durable.outbox.publishes`; spans `langgraph_durable.outbox.publish`.

Telemetry never fails a run. A misconfigured OpenTelemetry (a provider named in
`OTEL_PYTHON_TRACER_PROVIDER` that is not installed, an exporter that raises) raises from
calls made on every step, often after an effect's receiver acted; the first such error is
logged once, as a warning naming the setting, and telemetry is off for the rest of the
process.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from typing import Any

try:
    from opentelemetry import metrics, trace
except ImportError:  # the telemetry extra is not installed
    metrics = None  # type: ignore[assignment]
    trace = None  # type: ignore[assignment]

__all__ = ["annotate", "count", "enabled", "gauge", "measure", "span", "tracing"]

_SCOPE = "langgraph_durable"
_instruments: dict[str, Any] = {}
_off = False  # set by the first error OpenTelemetry raises (`_give_up`)

# The settings that name what the API loads on its first use; others cause a failure in an
# SDK or exporter, named by its error.
TRACER_SETTING = "OTEL_PYTHON_TRACER_PROVIDER"
METER_SETTING = "OTEL_PYTHON_METER_PROVIDER"
_SDK_SETTINGS = "the OpenTelemetry SDK, its exporters and their OTEL_* settings"

logger = logging.getLogger(__name__)

Attributes = Mapping[str, str | int | float | bool | None]


def _give_up(exc: Exception, setting: str) -> None:
    """Turn telemetry off for the process after an error OpenTelemetry raised, warning once.

    A run must not fail because its spans or metrics cannot be made: the error would end
    every run, after the side effects of its first step."""
    global _off
    if _off:
        return
    _off = True
    value = os.environ.get(setting) if setting.startswith("OTEL_") else None
    where = f"{setting}={value!r}" if value is not None else setting
    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    logger.warning(
        "OpenTelemetry raised %s. Telemetry is off for the rest of this process (runs go on "
        "without spans or metrics); check %s.",
        error,
        where,
    )


def enabled() -> bool:
    """Whether the OpenTelemetry API is installed and works (work done only to be measured
    can be skipped otherwise)."""
    return metrics is not None and not _off


@functools.cache
def _version() -> str:
    # Cached: a metadata lookup reads files, and spans are made on every step.
    try:
        return metadata.version("langgraph-durable")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown"


@functools.cache
def _tracer() -> Any:
    # One tracer per process: before an SDK is configured it is a proxy that starts
    # delegating once one is, so caching it loses nothing.
    assert trace is not None
    return trace.get_tracer(_SCOPE, _version())


def _clean(attributes: Attributes) -> dict[str, str | int | float | bool]:
    return {k: v for k, v in attributes.items() if v is not None}


def tracing() -> bool:
    """Whether an SDK's tracer provider is set. Until one is, the API hands out a proxy whose
    spans record nothing; skipping them saves about 2% of the CPU of a step (a step span
    per checkpoint). Asked on every span, so a provider set later is used from then on."""
    if trace is None or _off:
        return False
    try:
        provider = trace.get_tracer_provider()  # loads OTEL_PYTHON_TRACER_PROVIDER
    except Exception as exc:  # whatever the API raises, runs go on
        _give_up(exc, TRACER_SETTING)
        return False
    return not isinstance(provider, trace.ProxyTracerProvider)


@contextmanager
def span(name: str, attributes: Attributes) -> Iterator[Any]:
    """A span around a block (the current span inside it); None while no SDK is set up
    (or without OpenTelemetry, or once it failed). An exception leaving the block is
    recorded on the span and re-raised; one raised by OpenTelemetry itself, entering or
    leaving the span, is not: it turns telemetry off (`_give_up`)."""
    if not tracing():
        yield None
        return
    try:
        manager = _tracer().start_as_current_span(name, attributes=_clean(attributes))
        current = manager.__enter__()
    except Exception as exc:  # whatever the SDK raises, runs go on
        _give_up(exc, _SDK_SETTINGS)
        yield None
        return
    failed: BaseException | None = None
    try:
        yield current
    except BaseException as exc:  # the block's own: recorded below, then raised as it was
        failed = exc
    try:
        if failed is None:
            manager.__exit__(None, None, None)
        else:
            manager.__exit__(type(failed), failed, failed.__traceback__)
    except Exception as exc:
        if exc is not failed:
            _give_up(exc, _SDK_SETTINGS)
    if failed is not None:
        raise failed


def annotate(attributes: Attributes) -> None:
    """Add attributes to the current span (the outcome, once it is known). Gated like
    `span`: while no SDK provider is global, `span` made nothing, so the current span is
    the caller's own (from a provider it did not set globally) and is left alone."""
    if tracing():
        assert trace is not None
        try:
            trace.get_current_span().set_attributes(_clean(attributes))
        except Exception as exc:  # whatever the SDK raises, runs go on
            _give_up(exc, _SDK_SETTINGS)


def _instrument(kind: str, name: str, unit: str, description: str) -> Any:
    found = _instruments.get(name)
    if found is None:
        assert metrics is not None
        meter = metrics.get_meter(_SCOPE, _version())  # loads OTEL_PYTHON_METER_PROVIDER
        if kind == "counter":
            found = meter.create_counter(name, unit=unit, description=description)
        elif kind == "histogram":
            found = meter.create_histogram(name, unit=unit, description=description)
        else:
            found = meter.create_gauge(name, unit=unit, description=description)
        _instruments[name] = found
    return found


def _record(kind: str, name: str, unit: str, description: str, call: str, *args: Any) -> None:
    """Look the instrument up and record on it; an error of OpenTelemetry's turns telemetry
    off instead of reaching the run."""
    if not enabled():
        return
    try:
        instrument = _instrument(kind, name, unit, description)
    except Exception as exc:  # whatever the API raises, runs go on
        _give_up(exc, METER_SETTING)
        return
    try:
        getattr(instrument, call)(*args)
    except Exception as exc:
        _give_up(exc, _SDK_SETTINGS)


def count(name: str, value: int, attributes: Attributes, description: str = "") -> None:
    """Add to a counter."""
    if value:
        _record("counter", name, "1", description, "add", value, _clean(attributes))


def measure(name: str, value: float, attributes: Attributes, unit: str = "s") -> None:
    """Record a value in a histogram."""
    _record("histogram", name, unit, "", "record", value, _clean(attributes))


def gauge(name: str, value: float, attributes: Attributes, unit: str = "1") -> None:
    """Set a gauge to the value just seen."""
    _record("gauge", name, unit, "", "set", value, _clean(attributes))
