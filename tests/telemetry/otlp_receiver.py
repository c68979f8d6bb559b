"""A real OTLP/HTTP trace receiver for tests: a local http.server taking POST /v1/traces, decoding each
ExportTraceServiceRequest with opentelemetry-proto (the exporter's own dependency) into plain span dicts."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.helpers import serve_in_thread


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs) -> dict:
    return {kv.key: _value(kv.value) for kv in pairs}


class OTLPReceiver:
    """Collects every span exported to `endpoint`; `spans` lists them as dicts (ids as hex)."""

    def __init__(self):
        self.spans: list[dict] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._take(ExportTraceServiceRequest.FromString(body))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def _take(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        {
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "start_ns": span.start_time_unix_nano,
                            "end_ns": span.end_time_unix_nano,
                            "attributes": _attributes(span.attributes),
                            "links": [
                                {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()} for link in span.links
                            ],
                            "status": span.status.code,
                            "resource": resource,
                        }
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(found)

    def start(self) -> OTLPReceiver:
        serve_in_thread(self.server, "otlp-receiver")
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
