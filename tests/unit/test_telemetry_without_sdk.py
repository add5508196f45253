"""Without an SDK, no span is made at all: the API's spans would record nothing, and a step
span per checkpoint cost about 2% of a step's CPU. Once an application sets a provider,
spans are made from then on. In a fresh process: the global provider can be set once.

An application may trace with a provider it never sets globally. Its span is then the
current one inside our calls, and our outcome attributes must not be written onto it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from langgraph_durable import _telemetry

_telemetry._tracer()  # a proxy tracer taken before the SDK, as a long-lived process has
with _telemetry.span("before", {"k": 1}) as made:
    assert made is None, made

own = InMemorySpanExporter()
own_provider = TracerProvider()  # the application's own, not set globally
own_provider.add_span_processor(SimpleSpanProcessor(own))
with own_provider.get_tracer("app").start_as_current_span("app.request"):
    with _telemetry.span("effect", {"k": 1}) as made:
        assert made is None, made
        _telemetry.annotate({"langgraph_durable.effect.outcome": "completed"})
[app_span] = own.get_finished_spans()
assert dict(app_span.attributes or {}) == {}, app_span.attributes

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with _telemetry.span("after", {"k": 1}) as made:
    assert made is not None and made.is_recording()
assert [s.name for s in exporter.get_finished_spans()] == ["after"]
"""


def test_spans_are_made_only_once_an_sdk_is_set() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
