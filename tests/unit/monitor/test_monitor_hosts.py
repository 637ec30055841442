"""The dashboard and the metrics endpoint answer only to the loopback's names when bound to
it (DNS rebinding), with real servers and raw HTTP requests. No Spark."""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from typing import Any

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
            assert status == 421 and b"answers to localhost" in body
            assert _get(port, path, None)[0] == 421
            status, body = _get(port, path, f"localhost:{port}")
            assert status == 200 and body
        assert b"slipstream_test_total 1.0" in _get(m.port, "/metrics", f"127.0.0.1:{m.port}")[1]


@pytest.mark.parametrize("bind", ["127.0.0.2", "127.1.2.3", "127.255.255.254", "[::1]", "::1"])
def test_every_loopback_bind_keeps_the_host_check(bind: str) -> None:
    """issue 29 item 13: `--bind 127.0.0.2` (loopback, reachable by a browser) turned it off."""
    assert not host_allowed("evil.example:8321", bind, 8321)
    assert not host_allowed(None, bind, 8321)
    assert host_allowed("127.0.0.2:8321", bind, 8321)  # the browser's Host for 127.0.0.2
    assert host_allowed("localhost:8321", bind, 8321)
    assert not host_allowed("128.0.0.1:8321", bind, 8321)  # not loopback


def test_a_server_on_127_0_0_2_refuses_a_foreign_host() -> None:
    with serve_dashboard(lambda: {"queries": []}, host="127.0.0.2") as dashboard:
        conn = http.client.HTTPConnection("127.0.0.2", dashboard.port, timeout=10)
        conn.putrequest("GET", "/api/status", skip_host=True)
        conn.putheader("Host", f"evil.example:{dashboard.port}")
        conn.endheaders()
        assert conn.getresponse().status == 421
        conn.close()


# ---- idle and vanished clients (item 14), on 127.0.0.1, bounded in count and time

IDLE = 80  # connections opened and left silent: more than the servers' bound of 32


def _servers() -> tuple[Any, Any]:
    registry = CollectorRegistry()
    Counter("slipstream_test_total", "a counter", registry=registry).inc()
    return serve_dashboard(lambda: {"queries": []}), serve_metrics(registry, 0)


def _wait_closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes `sock` within `within` seconds (recv sees EOF or a reset)."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_connections_hold_bounded_threads_and_time_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 29 item 14: 1,000 idle connections kept 1,003 threads for 60 s and more."""
    from slipstream.monitor import dashboard as dash_module
    from slipstream.monitor import hosts
    from slipstream.monitor import metrics as metrics_module

    monkeypatch.setattr(dash_module._Handler, "timeout", 1.0)
    monkeypatch.setattr(metrics_module._QuietHandler, "timeout", 1.0)
    before = threading.active_count()
    dashboard, metrics = _servers()
    peak = [0]
    done = threading.Event()

    def sample() -> None:  # the most threads seen while the connections are open
        while not done.wait(0.005):
            peak[0] = max(peak[0], threading.active_count() - before)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    idle: list[socket.socket] = []
    try:
        for port in (dashboard.port, metrics.port):
            for _ in range(IDLE):
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        # the server closes each silent connection within the timeout (1 s here, 10 s in use),
        # the ones past its bound at once
        started = time.monotonic()
        assert all(_wait_closed(s, within=5.0) for s in idle)
        assert time.monotonic() - started < 5.0
        # and then serves again
        assert _get(dashboard.port, "/healthz", f"localhost:{dashboard.port}")[0] == 200
        assert _get(metrics.port, "/metrics", f"localhost:{metrics.port}")[0] == 200
    finally:
        done.set()
        sampler.join()
        for s in idle:
            s.close()
        dashboard.close()
        metrics.close()
    # 2 serving threads, the sampler, and at most the bound of connection threads each
    assert 0 < peak[0] <= 3 + 2 * hosts.MAX_CONNECTIONS, peak


def test_a_client_that_vanishes_mid_answer_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """issue 29 item 14: clients closing printed 2,426 BrokenPipeError tracebacks (3 MB)."""
    dashboard, metrics = _servers()
    try:
        for port, path in ((dashboard.port, "/static/dashboard.js"), (metrics.port, "/metrics")):
            for _ in range(20):
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n".encode())
                # close with a reset (SO_LINGER 0) before reading the answer
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            for _ in range(20):  # half a request, then gone
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"GET / HT")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
        # the servers still answer (and have handled every vanished client by now)
        assert _get(dashboard.port, "/healthz", f"localhost:{dashboard.port}")[0] == 200
        assert _get(metrics.port, "/metrics", f"localhost:{metrics.port}")[0] == 200
    finally:
        dashboard.close()
        metrics.close()
    printed = capfd.readouterr()
    assert "Traceback" not in printed.err + printed.out
    assert "BrokenPipeError" not in printed.err and "ConnectionResetError" not in printed.err


def test_sigterm_while_a_connection_thread_starts_stops_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI at df7127b: SIGTERM's KeyboardInterrupt landed in the server's thread after the
    connection's thread had served and released its slot; the second release raised
    ValueError, socketserver logged it as a failed request, and the server served on."""
    import socketserver

    from slipstream.monitor import hosts

    class Server(hosts.BoundedServer, socketserver.ThreadingTCPServer):
        pass

    server = Server(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    client = socket.create_connection(server.server_address, timeout=5)
    request, address = server.get_request()

    def served_then_interrupted(thread: threading.Thread) -> None:
        thread.run()  # the connection is served and its slot released...
        raise KeyboardInterrupt  # ...before start() returns in the server's thread

    monkeypatch.setattr(threading.Thread, "start", served_then_interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            server.process_request(request, address)
        assert server._slots._value == hosts.MAX_CONNECTIONS  # every slot back, once
    finally:
        client.close()
        server.server_close()
