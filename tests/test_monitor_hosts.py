"""The dashboard and the metrics endpoint answer only to the loopback's names when bound to
it (DNS rebinding), with real servers and raw HTTP requests. No Spark."""

from __future__ import annotations

import http.client

import pytest
from prometheus_client import CollectorRegistry, Counter

from slipstream.monitor.dashboard import serve_dashboard
from slipstream.monitor.hosts import host_allowed
from slipstream.monitor.metrics import serve_metrics


def _get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        ("127.0.0.1:8321", True),
        ("localhost:8321", True),
        ("LOCALHOST:8321", True),
        ("[::1]:8321", True),
        ("evil.example:8321", False),  # a rebinding page's own name
        ("127.0.0.1:9999", False),  # another port
        ("127.0.0.1", False),  # port 80 implied
        ("", False),
        (None, False),
        ("127.0.0.1:8321:1", False),
    ],
)
def test_host_allowed_on_loopback(header: str | None, allowed: bool) -> None:
    assert host_allowed(header, "127.0.0.1", 8321) is allowed


def test_a_server_bound_elsewhere_on_purpose_answers_any_name() -> None:
    assert host_allowed("metrics.internal:9108", "0.0.0.0", 9108)


def test_both_servers_refuse_a_foreign_host_and_serve_their_own() -> None:
    registry = CollectorRegistry()
    Counter("slipstream_test_total", "a counter", registry=registry).inc()
    with serve_dashboard(lambda: {"queries": []}) as dashboard, serve_metrics(registry, 0) as m:
        for port, path in ((dashboard.port, "/api/status"), (m.port, "/metrics")):
            status, body = _get(port, path, f"evil.example:{port}")
            assert status == 421 and b"answers to 127.0.0.1" in body
            assert _get(port, path, None)[0] == 421
            status, body = _get(port, path, f"localhost:{port}")
            assert status == 200 and body
        assert b"slipstream_test_total 1.0" in _get(m.port, "/metrics", f"127.0.0.1:{m.port}")[1]
