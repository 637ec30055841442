"""The wait for a Spark Connect server that does not accept connections yet (issue 45: a busy
machine delayed a server's start past what the client waited for, and pyspark's client retried
silently). On an injected clock: no sleep, no server; tests/e2e/connect/test_connect.py runs a
real client against a real server that begins to accept while the client waits."""

from __future__ import annotations

import pytest

from slipstream.errors import SlipstreamError
from slipstream.settings.connect import server_address, wait_for_server


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


def test_the_address_never_carries_the_urls_parameters() -> None:
    assert server_address("sc://db.example:15010/;token=secret;use_ssl=true") == (
        "db.example",
        15010,
    )
    assert server_address("sc://127.0.0.1") == ("127.0.0.1", 15002)
    assert server_address("sc://[::1]:15003/;token=t") == ("::1", 15003)


def test_a_server_that_accepts_at_once_is_not_waited_for() -> None:
    said: list[str] = []
    clock = Clock()
    wait_for_server(
        "sc://h:1", 300, said.append, probe=lambda h, p: True, wait=clock.wait, clock=clock
    )
    assert said == [] and clock.now == 0


def test_a_slow_server_is_waited_for_saying_so_with_the_time_waited() -> None:
    said: list[str] = []
    clock = Clock()
    up_at = 100.0  # the server accepts from t=100 s on

    def probe(host: str, port: int) -> bool:
        assert (host, port) == ("h", 15002)
        return clock.now >= up_at

    wait_for_server(
        "sc://h/;token=secret", 300, said.append, probe=probe, wait=clock.wait, clock=clock
    )
    assert up_at <= clock.now <= up_at + 5  # pauses of at most 5 s
    assert said[0].startswith("slipstream: waiting for the Spark Connect server at h:15002")
    still = [line for line in said if "still waiting" in line]
    waited = [int(line.split(": ")[-1].split(" s of")[0]) for line in still]
    assert len(still) >= 5 and waited == sorted(waited) and all(w <= 100 for w in waited)
    # every SAY_EVERY_S (15 s; whole seconds as printed)
    assert all(b - a >= 14 for a, b in zip(waited, waited[1:], strict=False))
    assert said[-1].endswith(f"accepts connections (waited {clock.now:.0f} s)")
    assert not any("secret" in line for line in said)


def test_a_server_that_never_accepts_is_refused_with_a_code_and_the_fix() -> None:
    said: list[str] = []
    clock = Clock()
    with pytest.raises(SlipstreamError) as refused:
        wait_for_server(
            "sc://h:9/;token=secret", 60, said.append, probe=lambda h, p: False,
            wait=clock.wait, clock=clock,
        )  # fmt: skip
    assert refused.value.code == "CONNECT_UNREACHABLE"
    assert "h:9" in refused.value.message and "--connect-wait" in refused.value.fix
    assert clock.now == pytest.approx(60)
    assert "secret" not in str(refused.value) + "".join(said)
