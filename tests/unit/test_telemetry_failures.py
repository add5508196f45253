"""Telemetry never fails a run: an error OpenTelemetry raises (a provider setting naming
nothing installed, an SDK part that raises) is logged once, naming the setting, and
telemetry is off for the rest of the process. Each case in a fresh process: the API loads
its providers once per process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

EVERY_CALL = """
import logging
logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)  # its own report of the error
from langgraph_durable import _telemetry

for _ in range(2):
    with _telemetry.span("langgraph_durable.step", {"k": 1}) as made:
        assert made is None, made
    _telemetry.annotate({"k": 2})
    _telemetry.count("c", 1, {"k": 1})
    _telemetry.measure("m", 1.0, {})
    _telemetry.gauge("g", 1.0, {})
assert not _telemetry.tracing()
assert not _telemetry.enabled()
"""

BROKEN_SDK = """
import logging
logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from langgraph_durable import _telemetry

class Down(SpanProcessor):
    def on_start(self, span, parent_context=None):
        raise ConnectionError("collector down")

provider = TracerProvider()
provider.add_span_processor(Down())
trace.set_tracer_provider(provider)
with _telemetry.span("langgraph_durable.step", {"k": 1}) as made:
    assert made is None, made
assert not _telemetry.tracing()
"""

BLOCK_ERROR = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from langgraph_durable import _telemetry

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
class Mine(Exception):
    pass
try:
    with _telemetry.span("langgraph_durable.effect", {"k": 1}) as made:
        assert made is not None
        raise Mine("the receiver said no")
except Mine as exc:
    assert str(exc) == "the receiver said no"
else:
    raise AssertionError("the block's error was swallowed")
[span] = exporter.get_finished_spans()
assert [e.name for e in span.events] == ["exception"], span.events
assert _telemetry.tracing()
"""


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize("setting", ["OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"])
def test_a_provider_setting_that_names_nothing_turns_telemetry_off(setting: str) -> None:
    done = run(EVERY_CALL, **{setting: "nonexistent"})
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "Telemetry is off" in line]
    assert len(warnings) == 1, done.stderr
    assert f"{setting}='nonexistent'" in warnings[0]
    assert warnings[0].startswith("langgraph_durable._telemetry WARNING")


def test_an_sdk_part_that_raises_turns_telemetry_off() -> None:
    done = run(BROKEN_SDK)
    assert done.returncode == 0, done.stderr
    assert "ConnectionError: collector down. Telemetry is off" in done.stderr


def test_an_error_of_the_block_is_recorded_and_raised_unchanged() -> None:
    done = run(BLOCK_ERROR)
    assert done.returncode == 0, done.stderr
