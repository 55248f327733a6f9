"""One SDK tracer provider for the tracing tests, exporting to memory.

OpenTelemetry accepts one global provider per process, so it is installed once for the session
and each test starts from an empty exporter and the default content setting (off).
"""

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from maitre.tracing import CAPTURE_CONTENT_ENV, set_capture_content, tracing_enabled


@pytest.fixture(scope="session")
def _exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:  # pragma: no cover - another test set one first
        pytest.fail("a tracer provider was installed before the tracing tests")
    assert tracing_enabled()
    return exporter


@pytest.fixture
def spans(_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    set_capture_content(None)
    _exporter.clear()
    yield _exporter
    set_capture_content(None)
    _exporter.clear()
