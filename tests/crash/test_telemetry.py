"""Telemetry of a run that crashed and resumed: spans, metrics and their ids.

A real worker process (`run_worker.py`) takes an order run and is SIGKILLed right after
its first effect's result was journaled (`effect:after_result`), before the step's
checkpoint. This process then takes the run over (its lease moved into the past in the
database, not waited for) with OpenTelemetry's SDK and in-memory exporters installed, and
reads what was emitted: a run span with the run's ids, its attempt and its recovery time;
the reservation replayed from the journal, the two other effects completed, under the
run's span; and the metrics that count them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_durable import DurablePostgresSaver, RunStatus, Worker

HERE = Path(__file__).parent
WORKER = HERE / "run_worker.py"
ROOT = HERE.parents[1]

pytestmark = pytest.mark.crash

_SPANS = InMemorySpanExporter()
_METRICS = InMemoryMetricReader()


@pytest.fixture(scope="module")
def telemetry() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    # OpenTelemetry's global providers can be set once per process: set here, shut down
    # after this module so that the rest of the suite records (and keeps) nothing.
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(_SPANS))
    trace.set_tracer_provider(tracing)
    metering = MeterProvider(metric_readers=[_METRICS])
    metrics.set_meter_provider(metering)
    yield _SPANS, _METRICS
    _SPANS.clear()
    tracing.shutdown()
    metering.shutdown()


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    # None until something was recorded: a test polling for a point (run alone, not after
    # the module's first test) waits on instead of failing.
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_a_crashed_and_resumed_run_is_traced_with_its_replayed_effect(
    fresh_db_dsn: str, telemetry: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    spans, reader = telemetry
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    created = subprocess.run(
        [sys.executable, str(WORKER), fresh_db_dsn, "--create", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    (run_id,) = json.loads(created.stdout.strip().splitlines()[-1])
    crashing = subprocess.run(
        [sys.executable, str(WORKER), fresh_db_dsn, "--lease", "60"],
        env={**env, "LANGGRAPH_DURABLE_CRASH_AT": "effect:after_result"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert crashing.returncode == -signal.SIGKILL, crashing.stderr
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn:
        journaled = conn.execute(
            "SELECT effect_name, status FROM langgraph_durable_effects"
        ).fetchall()
        assert journaled == [("fleet.reserve", "completed")]
        # The dead worker's lease runs out (moved in the database, not waited for).
        conn.execute(
            "UPDATE langgraph_durable_runs SET lease_expires_at = now() - interval '1 second'"
        )
        conn.execute(
            "UPDATE langgraph_durable_threads SET lease_expires_at = now() - interval '1 second'"
        )

    sys.path.insert(0, str(HERE))
    try:
        import run_worker
    finally:
        sys.path.remove(str(HERE))
    spans.clear()
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        graph = run_worker.build(saver, fresh_db_dsn)
        (done,) = Worker(saver, [graph]).run_until_idle()
    assert (done.run_id, done.status, done.attempt) == (run_id, RunStatus.SUCCESS, 2)

    finished = spans.get_finished_spans()
    (run_span,) = [s for s in finished if s.name == "langgraph_durable.run"]
    attributes = dict(run_span.attributes or {})
    assert attributes["langgraph_durable.run_id"] == run_id
    assert attributes["langgraph_durable.thread_id"] == done.thread_id
    assert attributes["langgraph_durable.attempt"] == 2
    assert attributes["langgraph_durable.run.status"] == "success"
    assert float(attributes["langgraph_durable.recovered_after_s"]) > 0  # type: ignore[arg-type]
    effects = {
        str((s.attributes or {})["langgraph_durable.effect.name"]): s
        for s in finished
        if s.name == "langgraph_durable.effect"
    }
    outcomes = {
        name: (s.attributes or {})["langgraph_durable.effect.outcome"]
        for name, s in effects.items()
    }
    assert outcomes == {
        "fleet.reserve": "replayed",
        "fleet.charge": "completed",
        "fleet.notify": "completed",
    }
    for span in effects.values():
        assert span.parent is not None
        assert span.parent.span_id == run_span.context.span_id  # under the run's span
        assert (span.attributes or {})["langgraph_durable.thread_id"] == done.thread_id

    steps = [s for s in finished if s.name == "langgraph_durable.step"]
    assert steps, "no step span"
    for span in steps:
        step_attributes = dict(span.attributes or {})
        assert step_attributes["langgraph_durable.thread_id"] == done.thread_id
        assert step_attributes["langgraph_durable.run_id"] == run_id
        assert span.context.trace_id == run_span.context.trace_id  # in the run's trace
    assert sorted(int(s.attributes["langgraph_durable.step"]) for s in steps)[-1] >= 3  # type: ignore[index,arg-type]

    calls = {
        (p.attributes["effect"], p.attributes["outcome"]): p.value
        for p in points(reader, "langgraph_durable.effect.calls")
    }
    assert calls[("fleet.reserve", "replayed")] == 1
    assert calls[("fleet.charge", "completed")] == 1
    finished_runs = {
        p.attributes["status"]: p.value for p in points(reader, "langgraph_durable.runs.finished")
    }
    assert finished_runs["success"] >= 1
    (recovery,) = points(reader, "langgraph_durable.run.recovery")
    assert recovery.count == 1


async def test_a_relay_reports_publishes_and_its_backlog(
    fresh_db_dsn: str, telemetry: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    import asyncio
    import time

    from langgraph_durable.outbox import OutboxRelay, emit_txn
    from langgraph_durable.outbox.publishers import CallbackPublisher

    spans, reader = telemetry
    with DurablePostgresSaver.from_conn_string(fresh_db_dsn) as saver:
        saver.setup()
    with psycopg.connect(fresh_db_dsn, autocommit=True) as conn, conn.transaction():
        emit_txn(conn, "tele.ok", {"n": 1}, key="ok")
        emit_txn(conn, "tele.poison", {"n": 2}, key="poison")

    def publish(event: Any) -> None:
        if event.event_type == "tele.poison":
            raise RuntimeError("receiver refused it")

    relay = OutboxRelay(fresh_db_dsn, CallbackPublisher(publish), max_attempts=1)
    stop = asyncio.Event()
    serving = asyncio.create_task(relay.run(stop))

    def backlog() -> dict[str, float]:
        return {
            p.attributes["status"]: p.value
            for p in points(reader, "langgraph_durable.outbox.backlog")
        }

    deadline = time.monotonic() + 120  # a hang guard, not a time limit
    while backlog().get("dead") != 1:
        assert time.monotonic() < deadline, backlog()
        assert not serving.done(), serving
        await asyncio.sleep(0.05)  # a poll interval of the metric reader
    stop.set()
    await serving
    assert backlog() == {"pending": 0, "dead": 1}
    published = {
        (p.attributes["event_type"], p.attributes["outcome"]): p.value
        for p in points(reader, "langgraph_durable.outbox.publishes")
    }
    assert published == {("tele.ok", "published"): 1, ("tele.poison", "failed"): 1}
    names = [s.name for s in spans.get_finished_spans()]
    assert names.count("langgraph_durable.outbox.publish") >= 2
