"""The pipelines whose plans Spark 4.3's real-time mode runs, beyond `wordcount` and `mobile`
(tests/e2e/kafka/test_realtime.py): `iot_steps` and `sensors` (all three outputs) into SQLite
and `trending` (its real-time deduplication form, `--dedup auto`) into PostgreSQL, each a
`slipstream run ... --trigger real-time:10m` of its own from its own topic, the three at once,
each table compared with pandas over what was produced.

The inputs are in event-time order and span an hour; the epochs last 10 minutes, so the whole
test runs inside each query's first epoch: the watermark does not move, nothing is late or
evicted, and the tables are the counts over everything produced. Re-sent records are exact
copies (the case where the two deduplication forms agree; tests/spark/analysis/
test_realtime_forms.py shows where they differ). Synchronisation: each table is polled until
it equals pandas, under a deadline (what the rows must become is known; only when is not)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.core.specs import SinkSpec
from slipstream.sinks.postgres_io import PgTarget, plain
from slipstream.sinks.postgres_io import connect as pg_connect
from slipstream.sinks.sqlite import read_table
from tests.e2e.kafka.test_realtime import LONG_EPOCHS, STARTED_WITHIN_S, _until
from tests.services import produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


class Run:
    """`slipstream run PIPELINE ARGS` in its own process (its own JVM), as a user types it,
    with `threads` task threads (a real-time query holds a slot per topic partition and per
    shuffle partition for its whole run) and one shuffle partition."""

    def __init__(self, pipeline: str, tmp_path: Path, threads: int, *args: str) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.log = tmp_path / "run.log"
        self.command = [
            sys.executable, "-m", "slipstream", "run", pipeline, *args,
            "--trigger", LONG_EPOCHS, "--master", f"local[{threads}]",
            "--conf", "spark.sql.shuffle.partitions=1", "--state-dir", str(tmp_path / "state"),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> None:
        """Fails once the process ended or one of its queries failed (the run goes on with
        the others)."""
        assert self.process is not None
        text = self.log.read_text()
        if self.process.poll() is not None or ": FAILED: " in text:
            raise AssertionError(text[-3000:])

    def end(self) -> None:
        """SIGKILL to the run's process group (Python, its JVM, its workers). Not Ctrl-C: that
        stops each query at its epoch's end, waiting up to 60 s per query (runtime/run.py), and
        these epochs last 10 minutes (sensors' three queries took over 120 s to stop); the
        tables are read before, and test_realtime.py's mobile run tests the stop."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(60)


def _stamps(count: int, rng: random.Random) -> list[datetime]:
    return sorted(START + timedelta(seconds=rng.randrange(3600)) for _ in range(count))


def _iso(moment: Any) -> str:
    return pd.Timestamp(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def _iot_lines(rng: random.Random) -> list[str]:
    return [
        json.dumps(
            {
                "id": i,
                "user_id": rng.randrange(5),
                "device_id": rng.randrange(5),
                "num_steps": rng.randrange(200),
                "miles_walked": 0.5,
                "calories_burnt": 20.0,
                "timestamp": ts.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
                "value": "x",
            }
        )  # fmt: skip
        for i, ts in enumerate(_stamps(200, rng))
    ]


def _iot_expected(lines: list[str]) -> list[tuple[Any, ...]]:
    frame = pd.DataFrame([json.loads(x) for x in lines])
    frame["start"] = pd.to_datetime(frame["timestamp"], utc=True).dt.floor("5min")
    sums = frame.groupby("start")["num_steps"].sum()
    return sorted((_iso(start), int(total)) for start, total in sums.items())


def _sensor_lines(rng: random.Random) -> list[str]:
    lines = [
        json.dumps(
            {
                "sensor_id": f"s{rng.randrange(5)}",
                "event_time": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "value": rng.randrange(1000) / 10,
                "error_code": rng.choice([None, None, "E1", "E2"]),
            }
        )
        for ts in _stamps(300, rng)
    ]
    # a reading re-sent: an exact copy, right after it
    for index in sorted(rng.sample(range(len(lines)), 20), reverse=True):
        lines.insert(index + 1, lines[index])
    return lines


def _sensor_expected(lines: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """sensor_stats (count, min, max per 5-minute window and sensor), sensor_alerts (windows
    with more than 5 readings: --max-per-minute 1 x 5 minutes) and sensor_baseline (count per
    sensor), over the readings once each."""
    frame = pd.DataFrame([json.loads(x) for x in lines]).drop_duplicates(
        ["sensor_id", "event_time"]
    )
    frame["start"] = pd.to_datetime(frame["event_time"], utc=True).dt.floor("5min")
    stats = frame.groupby(["start", "sensor_id"])["value"].agg(["count", "min", "max"])
    rows = [(_iso(s), k, int(n), lo, hi) for (s, k), (n, lo, hi) in stats.iterrows()]
    return {
        "sensor_stats": sorted(rows),
        "sensor_alerts": sorted((s, k, n) for s, k, n, _, _ in rows if n > 5),
        "sensor_baseline": sorted(
            (k, int(n)) for k, n in frame.groupby("sensor_id").size().items()
        ),
    }


def _sensor_tables(database: Path) -> dict[str, list[tuple[Any, ...]]]:
    def rows(table: str, *columns: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r[c] for c in columns) for r in read_table(database, table))

    return {
        "sensor_stats": rows(
            "sensor_stats", "window_start", "sensor_id", "readings", "min_value", "max_value"
        ),
        "sensor_alerts": rows("sensor_alerts", "window_start", "sensor_id", "readings"),
        "sensor_baseline": rows("sensor_baseline", "sensor_id", "readings"),
    }


CATALOG = {"a1": "news", "a2": "sport", "a3": "news"}  # a4 and a5 are not in it


def _trending_lines(rng: random.Random) -> list[str]:
    lines = [
        json.dumps(
            {
                "event_id": f"e{i}",
                "article_id": f"a{rng.randrange(1, 6)}",
                "user_id": f"u{rng.randrange(20)}",
                "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        for i, ts in enumerate(_stamps(150, rng))
    ]
    for index in sorted(rng.sample(range(len(lines)), 15), reverse=True):
        lines.insert(index + 1, lines[index])  # re-sent as an exact copy (the generator's way)
    return lines


def _trending_expected(lines: list[str]) -> list[tuple[Any, ...]]:
    """Views per 10-minute window sliding by a minute and article: each event once, in the ten
    windows whose start is one of the ten minutes up to its own."""
    frame = pd.DataFrame([json.loads(x) for x in lines]).drop_duplicates("event_id")
    minute = pd.to_datetime(frame["ts"], utc=True).dt.floor("1min")
    windows = pd.concat([frame.assign(start=minute - pd.Timedelta(minutes=k)) for k in range(10)])
    views = windows.groupby(["start", "article_id"]).size()
    return sorted((_iso(s), a, int(n), a in CATALOG) for (s, a), n in views.items())


def test_iot_steps_sensors_and_trending_in_real_time_mode(
    kafka_spark: SparkSession,
    kafka: Any,
    postgres: Any,
    pg_database: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Three runs at once, each from its own one-partition topic: iot_steps into SQLite in
    update mode (the default under a real-time trigger; its own default, append to Parquet,
    cannot run so), sensors' three outputs into one SQLite file (sensor_alerts in update mode:
    a window's row as soon as it passes the limit), trending into PostgreSQL with the
    deduplication `--dedup auto` picks for real-time mode. Each table equals pandas over
    what was produced, re-sent records counted once; the runs print their dedup form."""
    rng = random.Random(39)
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    sent = {"iot": _iot_lines(rng), "sensors": _sensor_lines(rng), "trending": _trending_lines(rng)}
    topics = {}
    for key, lines in sent.items():
        topics[key] = kafka.create_topic(f"{name}-{key}", 1)
        produce(kafka.bootstrap, topics[key], lines)
    url = {key: kafka.url(topic, startingOffsets="earliest") for key, topic in topics.items()}
    catalog = tmp_path / "catalog.csv"
    catalog.write_text(
        "article_id,title,section\n" + "".join(f"{a},{a.upper()},{s}\n" for a, s in CATALOG.items())
    )
    iot_db, sensors_db = tmp_path / "iot.db", tmp_path / "sensors.db"
    runs = {
        "iot": Run("iot_steps", tmp_path / "iot", 3, "--input", url["iot"],
                   "--sink", f"sqlite:{iot_db}"),
        # three real-time queries of three slots each (a partition, then the deduplication's
        # and the aggregation's shuffle partition); trending likewise
        "sensors": Run("sensors", tmp_path / "sensors", 10, "--input", url["sensors"],
                       "--sink", f"sqlite:{sensors_db}"),
        "trending": Run("trending", tmp_path / "trending", 4,
                        "--input", f"events={url['trending']}", "--input", f"catalog={catalog}",
                        "--mode", "update", "--sink", postgres.url(pg_database)),
    }  # fmt: skip
    target = PgTarget.from_spec(SinkSpec.parse(postgres.url(pg_database)))

    def iot_table() -> list[tuple[Any, ...]]:
        rows = read_table(iot_db, "iot_steps")
        return sorted((r["window_start"], r["num_steps"]) for r in rows)

    def trending_table() -> list[tuple[Any, ...]]:
        with pg_connect(target) as conn:
            if conn.execute("SELECT to_regclass('article_views')").fetchone() == (None,):
                return []
            found = conn.execute(
                "SELECT window_start, article_id, views, in_catalog FROM article_views"
            ).fetchall()
        return sorted((plain(w), a, v, c) for w, a, v, c in found)

    checks: list[tuple[str, Callable[[], Any], Any]] = [
        ("iot", iot_table, _iot_expected(sent["iot"])),
        ("sensors", lambda: _sensor_tables(sensors_db), _sensor_expected(sent["sensors"])),
        ("trending", trending_table, _trending_expected(sent["trending"])),
    ]
    for run in runs.values():
        run.start()
    try:
        for key, read, expected in checks:
            _until(read, expected, f"{key}: what was produced", runs[key].alive, STARTED_WITHIN_S)
    finally:
        for run in runs.values():
            run.end()
    text = runs["trending"].log.read_text()
    assert "dedup       dropDuplicates(event_id, ts): " in text, text[-3000:]
