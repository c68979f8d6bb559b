"""A real OTLP/HTTP receiver and our tracer provider exporting to it, installed for one test."""

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from core.telemetry import tracing
from tests.telemetry.otlp_receiver import OTLPReceiver


@pytest.fixture
def otlp(request):
    """The receiver; tracing is on (through `tracing_install`, not the SDK's global provider) until the test ends.
    A test marked `capture_content` has prompts and completions on its model-call spans."""
    receiver = OTLPReceiver().start()
    provider = tracing.provider_build(OTLPSpanExporter(endpoint=receiver.endpoint))
    receiver.provider = provider
    before = tracing.tracing_install(provider, capture_content=bool(request.node.get_closest_marker("capture_content")))
    try:
        yield receiver
    finally:
        tracing.tracing_install(before)
        provider.shutdown()
        receiver.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "capture_content: model-call spans carry prompts and completions")
