"""`configure_otlp` sends the spans to an OTLP/HTTP collector; without the extra it says what to install."""

import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from maitre._extras import MissingExtraError
from maitre.tracing import configure_otlp

CHILD = textwrap.dedent(
    """
    import sys
    import anyio
    from maitre import Gate, Principal, Toolbox, ToolCall
    from maitre.tracing import configure_otlp

    configure_otlp(sys.argv[1], service_name="shop-traces")
    box = Toolbox("orders")

    @box.tool
    def get_order(order_id: str) -> str:
        '''Look an order up.'''
        return "shipped"

    call = ToolCall(id="call-1", name="orders.get_order", arguments={"order_id": "A1"})
    result = anyio.run(Gate(box).call, call, Principal(user="u"))
    assert not result.is_error
    # exiting flushes the batch processor (the provider shuts down at exit)
    """
)


def test_spans_reach_an_otlp_http_collector():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = subprocess.run(
            [sys.executable, "-c", CHILD, url], capture_output=True, text=True, timeout=60, check=False
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # library code never writes to stdout
    assert [path for path, _ in received] == ["/v1/traces"]
    request = ExportTraceServiceRequest.FromString(received[0][1])
    (resource_spans,) = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    assert service == "shop-traces"
    spans = [span for scope in resource_spans.scope_spans for span in scope.spans]
    assert [span.name for span in spans] == ["execute_tool orders.get_order"]
    attributes = {a.key: a.value for a in spans[0].attributes}
    assert attributes["gen_ai.tool.call.id"].string_value == "call-1"


def test_a_missing_otel_extra_is_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch):
    for name in (
        "opentelemetry.exporter.otlp.proto.http",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    ):
        monkeypatch.setitem(sys.modules, name, None)  # the exporter package is not installed
    with pytest.raises(MissingExtraError) as raised:
        configure_otlp("http://127.0.0.1:4318")
    message = str(raised.value)
    assert "\n" not in message
    assert "pip install 'maitre[otel]'" in message
