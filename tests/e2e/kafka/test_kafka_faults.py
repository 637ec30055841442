"""Kafka faults (issue 27 item 9) on a real broker, through `slipstream run` as a user types it:
records of the topic deleted before the run read them (KAFKA_DATA_LOST, and the run that takes
the fix), and the broker SIGKILLed mid-run and restarted on the same data and port
(KAFKA_UNREACHABLE once its timeouts pass, then a restart that resumes). Each ends with the
SQLite table equal to pandas over what the topic still held. No Java stack on the terminal."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.e2e.kafka.test_kafka import _mobile_lines
from tests.helpers import mobile_counts
from tests.services import produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
SPARK_ARGS = [
    "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2",
    "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
]  # fmt: skip
#: small client timeouts: a broker that is gone fails the run in seconds, not minutes
QUICK = {
    "kafka.default.api.timeout.ms": "4000",
    "kafka.request.timeout.ms": "2000",
    "fetchOffset.numRetries": "1",
    "fetchOffset.retryIntervalMs": "200",
    "kafkaConsumer.pollTimeoutMs": "4000",
}


def _args(url: str, state: Path, *extra: str) -> list[str]:
    return [
        "run", "mobile", "--input", url, "--sink", f"sqlite:{state / 'out.db'}",
        "--mode", "update", "--state-dir", str(state), "--quiet", *extra,
    ]  # fmt: skip


def _run_here(url: str, state: Path) -> int:
    """An available-now run in this process, on the test session's Spark (a run expected to
    succeed: only the failing ones need their own terminal)."""
    from slipstream.app.cli import main

    return main(_args(url, state, "--trigger", "available-now"))


def _run(url: str, state: Path, *extra: str, wait: bool = True) -> Any:
    """`slipstream run` in its own process: what reaches its terminal."""
    command = [sys.executable, "-m", "slipstream", *_args(url, state, *SPARK_ARGS, *extra)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    if wait:
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _table(state: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(state / "out.db") as conn:
        rows = conn.execute("SELECT window_start, action, count FROM mobile_action_counts")
        return sorted((str(w), str(a), int(c)) for w, a, c in rows)


def _expected(lines: list[str]) -> list[tuple[str, str, int]]:
    counts = mobile_counts(lines)[["window_start", "action", "count"]].values.tolist()
    return sorted((str(w), str(a), int(c)) for w, a, c in counts)


def _said(text: str) -> str:
    """What a run said on its terminal, without Spark's package resolution report."""
    return "\n".join(x for x in text.splitlines() if not x.startswith(("\t", ":: ", "  ")))[-4000:]


def _no_stack(text: str) -> None:
    assert "\tat org.apache" not in text and "Traceback" not in text, text[-3000:]


def _sorted_lines(count: int, seed: int) -> list[str]:
    # in event-time order: no record is late for an earlier batch's watermark
    return sorted(_mobile_lines(count, seed=seed), key=lambda line: json.loads(line)["ts"][:19])


def test_records_deleted_before_they_were_read_stop_the_run_with_the_fix(
    kafka_spark: Any, kafka: Any, tmp_path: Path
) -> None:
    """Records deleted (`deleteRecords`, as retention does) past the checkpoint's offset: the
    next run stops with KAFKA_DATA_LOST naming the topic and failOnDataLoss=false; the same
    command with that option reads on from the earliest record still there."""
    from confluent_kafka import TopicPartition

    topic = kafka.create_topic("faults-truncated", 1)
    lines = _sorted_lines(400, seed=31)
    produce(kafka.bootstrap, topic, lines[:200])
    url = kafka.url(topic, startingOffsets="earliest")
    state = tmp_path / "state"
    assert _run_here(url, state) == 0
    produce(kafka.bootstrap, topic, lines[200:])
    admin = kafka.admin()
    for future in admin.delete_records([TopicPartition(topic, 0, 300)]).values():
        future.result(30)  # offsets 200-299, never read, are gone

    lost = _run(url, state, "--trigger", "available-now")
    assert lost.returncode == 1, lost.stderr
    failed = [x for x in lost.stderr.splitlines() if x.startswith("slipstream: the query failed")]
    assert failed and "[KAFKA_DATA_LOST]" in failed[0], _said(lost.stderr)
    assert f"topic {topic} at {kafka.bootstrap}" in failed[0]
    assert f"{topic}-0" in failed[0]  # Spark's reason, the partition
    assert "failOnDataLoss=false" in lost.stderr and "fix:" in lost.stderr
    _no_stack(lost.stderr)
    assert _table(state) == _expected(lines[:200])  # the failed batch wrote nothing

    fixed = kafka.url(topic, startingOffsets="earliest", failOnDataLoss="false")
    assert _run_here(fixed, state) == 0
    assert _table(state) == _expected(lines[:200] + lines[300:])


def test_a_broker_killed_mid_run_fails_it_with_a_code_and_a_restart_resumes(
    kafka_spark: Any, tmp_path: Path
) -> None:
    """SIGKILL of the broker while a run reads it: once the client's timeouts pass the run
    stops with KAFKA_UNREACHABLE (exit 1, no stack); the broker restarted on the same data and
    port, the same command resumes: the table equals pandas over everything produced."""
    from slipstream.tools.kafka_broker import BrokerError, KafkaBroker
    from tests.services import unavailable

    try:
        broker = KafkaBroker(base=tmp_path / "broker").start()  # its own: this test kills it
    except BrokerError as exc:
        unavailable(str(exc), "the Kafka broker for the tests")
    try:
        topic = broker.create_topic("faults-killed", 2)
        lines = _sorted_lines(600, seed=37)
        produce(broker.bootstrap, topic, lines[:300])
        url = broker.url(topic, startingOffsets="earliest", **QUICK)
        state = tmp_path / "state"
        proc = _run(url, state, wait=False)
        commits = state / "checkpoints" / "mobile" / "counts" / "commits"
        deadline = time.monotonic() + 240
        while not (commits / "0").exists():  # bounded poll on the checkpoint, not a sleep
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no batch committed"
            time.sleep(0.1)
        broker.stop(kill=True)
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 1, err[-3000:]
        failed = [x for x in err.splitlines() if x.startswith("slipstream: the query failed")]
        assert failed and "[KAFKA_UNREACHABLE]" in failed[0], _said(err)
        assert broker.bootstrap in failed[0] and "run the same command" in err
        _no_stack(err)

        broker.start()  # the same data folder and port
        produce(broker.bootstrap, topic, lines[300:])
        assert _run_here(url, state) == 0
        assert _table(state) == _expected(lines)
        assert pd.Series([c for *_, c in _table(state)]).sum() == len(lines)
    finally:
        broker.destroy()
