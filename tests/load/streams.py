"""The harness's cases of the pipelines the fault campaign and the crash suite do not run:
sensors and the two stream-stream joins (ads, temperature_load), from generated files or a
topic, each judged by the independent model its own suite test uses (imported, not copied).

- `Sensors`: the file test's dirty readings (tests/spark/pipelines/test_sensors.py: late,
  out-of-order, duplicate, malformed), one file per micro-batch; its three tables against that
  test's replay (`stream_reference.counted` at each output's batch ids), and each output's
  summary against the replay's counts.
- `IntoKafka`: the same readings produced in file order to a one-partition topic of the
  harness's broker, read `maxOffsetsPerTrigger` records a batch: the replay over those chunks,
  as tests/e2e/kafka/test_kafka_pipelines.py replays them.
- `Joins`: ads or temperature_load over their generators' streams in one batch (their models,
  tests/join_reference.py, do not model batches), into SQLite or PostgreSQL; ads' final
  watermark is read from the checkpoint's offset log, as Spark wrote it."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests import stream_reference as ref
from tests.load.base import DATABASES, SPARK_ARGS, IntoSink, Result, run_slipstream, summaries

Tables = dict[str, list[dict[str, Any]]]
SENSOR_OUTPUTS = ("sensor_stats", "sensor_alerts", "sensor_baseline")


def read_sqlite(database: Path, names: tuple[str, ...]) -> Tables:
    """Each table's rows as dicts, as stored (sqlite3, not our reader)."""
    with sqlite3.connect(database) as conn:
        conn.row_factory = sqlite3.Row
        return {n: [dict(r) for r in conn.execute(f'SELECT * FROM "{n}"')] for n in names}


def read_postgres(server: Any, database: str, names: tuple[str, ...]) -> Tables:
    """Each table's rows as dicts (psycopg), timestamps as the SQLite sink writes them."""
    import psycopg
    from psycopg.rows import dict_row

    def plain(value: Any) -> Any:
        if isinstance(value, datetime):
            return ref.iso_exact(value if value.tzinfo else value.replace(tzinfo=UTC))
        return value

    with psycopg.connect(server.admin_dsn(database), row_factory=dict_row) as conn:
        rows = {n: list(conn.execute(f'SELECT * FROM "{n}"')) for n in names}
    return {n: [{k: plain(v) for k, v in row.items()} for row in rs] for n, rs in rows.items()}


def final_watermark(checkpoint: Path) -> datetime | None:
    """The watermark of a query's last batch, from its offset log (`offsets/N`: a version
    line, then the batch's metadata with `batchWatermarkMs`); None before it has one."""
    offsets = checkpoint / "offsets"
    last = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    meta = json.loads((offsets / str(last)).read_text().splitlines()[1])
    ms = int(meta.get("batchWatermarkMs", 0))
    return datetime.fromtimestamp(ms / 1000, UTC) if ms else None


def check_totals(result: Result, query: str, want: dict[str, int]) -> None:
    """The run's summary line of `query` says the model's counts (those it has)."""
    said = summaries(result.log).get(query)
    got = said and {k: said[k] for k in want}
    if got != want:
        result.fail(f"{query}: the summary says {got}, the model {want}")


# --- sensors -------------------------------------------------------------------------------


@dataclass
class Sensors(IntoSink):
    """sensors from files, one file per micro-batch."""

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        from slipstream.tools.generators import sensors as generator
        from slipstream.tools.generators.streams import generate
        from tests.helpers import landed_batches
        from tests.spark.pipelines.test_sensors import SPEC

        result = Result(self.name)
        spec = replace(SPEC, duration=timedelta(minutes=28))  # 8 files, 644 readings
        report = generate(spec, generator.Sensors(12, 2, 2, 2, seed=spec.seed), workdir / "in")
        files = landed_batches(workdir / "in", "readings")
        inputs, batches, env = self.inputs(workdir, files, kafka)
        state = workdir / "state"
        args = ["sensors", *inputs, "--trigger", "available-now", "--sink", "sqlite",
                "--state-dir", str(state), *SPARK_ARGS]  # fmt: skip
        if run_slipstream(result, args, **env):
            judge_sensors(result, state, report, batches)
        return result

    def inputs(
        self, workdir: Path, files: list[list[str]], kafka: Any
    ) -> tuple[list[str], list[list[str]], dict[str, str]]:
        """The run's input flags, the micro-batches they make, and its environment."""
        return ["--input", str(workdir / "in"), "--max-files-per-trigger", "1"], files, {}


@dataclass
class IntoKafka(Sensors):
    """sensors from a topic, `per_batch` records a micro-batch."""

    per_batch: int = 100
    kafka = True

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.pipeline} from kafka into {self.sink}"

    def inputs(
        self, workdir: Path, files: list[list[str]], kafka: Any
    ) -> tuple[list[str], list[list[str]], dict[str, str]]:
        from slipstream.settings.kafka_connector import CONNECTOR_ENV
        from tests.services import produce

        lines = [line for file in files for line in file]
        topic = kafka.create_topic(f"load-{self.pipeline}-{workdir.name}")
        produce(kafka.bootstrap, topic, lines)
        url = kafka.url(topic, startingOffsets="earliest", maxOffsetsPerTrigger=str(self.per_batch))
        batches = [lines[i : i + self.per_batch] for i in range(0, len(lines), self.per_batch)]
        env = {CONNECTOR_ENV: os.environ[CONNECTOR_ENV]} if CONNECTOR_ENV in os.environ else {}
        return ["--input", url], batches, env


def judge_sensors(result: Result, state: Path, report: Any, batches: list[list[str]]) -> None:
    """Each output against the replay at its own batch ids, and its summary's counts."""
    from tests.helpers import data_batch_ids
    from tests.spark.pipelines.test_sensors import (
        WATERMARK,
        WINDOW,
        _assert_alerts,
        _assert_baseline,
        _assert_stats_equal,
    )

    tables = read_sqlite(state / "slipstream.db", SENSOR_OUTPUTS)
    now = datetime.now(UTC)
    sent = sum(map(len, batches))
    for output in SENSOR_OUTPUTS:
        try:
            ids = data_batch_ids(state / "checkpoints" / "sensors" / output)
            readings, stats = ref.counted(
                batches, lambda x: ref.sensor_reading(x, now), "event_time",
                lambda r: (r["sensor_id"], r["event_time"]), WATERMARK, None, ids,
            )  # fmt: skip
            run = {"report": report, "tables": tables, "readings": readings, "stats": stats}
            if output == "sensor_stats":
                expected = ref.sensor_stats(readings, WINDOW)
                _assert_stats_equal(tables[output], expected, WINDOW)
            elif output == "sensor_alerts":
                _assert_alerts(run, WINDOW)
            else:
                _assert_baseline(run)
        except AssertionError as exc:
            result.fail(f"{output} differs from the replay: {exc}"[:500])
            continue
        counts = {"rows": sent, "quarantined": stats["invalid"], "late": stats["late"],
                  "duplicates": stats["duplicates"]}  # fmt: skip
        check_totals(result, f"sensors.{output}", counts)


# --- the stream-stream joins ---------------------------------------------------------------


def _ads_workload() -> tuple[Any, Any]:
    """tests/e2e/kafka/test_kafka_pipelines.py's ads: 5 hours, 257 lines in 26 files."""
    from slipstream.tools.generators import ads

    spec = replace(ads.DEFAULTS, duration=timedelta(hours=5), file_every=timedelta(minutes=30),
                   malformed=0.03, duplicates=0.02)  # fmt: skip
    return spec, ads.Ads(rate=0.012, ads=6, users=300, ctr=0.2, seed=8)


def _temperature_load_workload() -> tuple[Any, Any]:
    """tests/e2e/kafka/test_kafka_pipelines.py's temperature_load: 4 hours, 240 lines."""
    from slipstream.tools.generators import temperature_load

    spec = replace(temperature_load.DEFAULTS, duration=timedelta(hours=4),
                   file_every=timedelta(minutes=15), malformed=0.03)  # fmt: skip
    return spec, temperature_load.Locations(6)


@dataclass
class Joins(IntoSink):
    """ads or temperature_load from files, each stream's all in one micro-batch."""

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        from slipstream.tools.generators.streams import generate
        from tests.helpers import landed_batches

        result = Result(self.name)
        spec, workload = WORKLOADS[self.pipeline]()
        report = generate(spec, workload, workdir / "in")
        names = [shape.name for shape in workload.shapes]
        lines = {n: [x for b in landed_batches(workdir / "in" / n, n) for x in b] for n in names}
        inputs = [f for n in names for f in ("--input", f"{n}={workdir / 'in' / n}")]
        if self.pipeline == "ads":
            catalog = workload.write_catalog(workdir / "catalog.csv")
            inputs += ["--input", f"catalog={catalog}"]
        sink, read = self.sink_of(workdir, postgres)
        state = workdir / "state"
        args = [self.pipeline, *inputs, "--trigger", "available-now", *sink,
                "--state-dir", str(state), *SPARK_ARGS]  # fmt: skip
        if not run_slipstream(result, args):
            return result
        try:
            JUDGES[self.pipeline](result, read, lines, report, workdir)
        except AssertionError as exc:
            result.fail(f"a table differs from the model: {exc}"[:500])
        return result

    def sink_of(
        self, workdir: Path, postgres: Any
    ) -> tuple[list[str], Callable[[tuple[str, ...]], Tables]]:
        """The sink's flags, and how its tables are read back."""
        if self.sink == "sqlite":
            return ["--sink", "sqlite"], lambda names: read_sqlite(
                workdir / "state" / "slipstream.db", names
            )
        with DATABASES:
            database = postgres.create_database(
                f"load_{self.pipeline}_{workdir.name}".replace("-", "_")
            )
        flags = ["--sink", f"{postgres.url(database)}?parallel_rows=0"]
        return flags, lambda names: read_postgres(postgres, database, names)


def judge_ads(
    result: Result, read: Callable[..., Tables], lines: dict[str, list[str]], report: Any,
    workdir: Path,
) -> None:  # fmt: skip
    from slipstream.tools.generators.ads import read_catalog
    from tests.join_reference import ads_records, check_ads

    tables = read(("ad_clicks_attributed", "ad_impressions_outcome", "campaign_stats"))
    checkpoint = workdir / "state" / "checkpoints" / "ads" / "ad_impressions_outcome"
    watermark = final_watermark(checkpoint)
    imps = ads_records("impressions", lines["impressions"])
    clicks = ads_records("clicks", lines["clicks"])
    check_ads(tables, watermark, imps, clicks, read_catalog(workdir / "catalog.csv"))
    malformed = sum(c.malformed for c in report.streams.values())
    # its model counts a duplicate impression or click once, and says nothing of lateness
    counts = {"rows": sum(map(len, lines.values())), "quarantined": malformed}
    check_totals(result, "ads.ad_clicks_attributed", counts)


def judge_temperature_load(
    result: Result, read: Callable[..., Tables], lines: dict[str, list[str]], report: Any,
    workdir: Path,
) -> None:  # fmt: skip
    from tests.join_reference import temperature_load_pairs, temperature_load_reading

    rows = read(("temperature_load",))["temperature_load"]
    parsed = {
        s: [r for r in (temperature_load_reading(s, x) for x in xs) if r] for s, xs in lines.items()
    }
    expected = temperature_load_pairs(parsed["temperature"], parsed["load"])
    got = {(r["location_id"], r["temp_taken_time"], r["load_taken_time"]) for r in rows}
    assert len(rows) == len(expected) > 0, (len(rows), len(expected))
    assert got == expected, (sorted(got - expected)[:3], sorted(expected - got)[:3])
    sent = sum(map(len, lines.values()))
    invalid = sent - sum(map(len, parsed.values()))
    counts = {"rows": sent, "quarantined": invalid, "late": 0, "duplicates": 0}
    check_totals(result, "temperature_load.temperature_load", counts)


WORKLOADS: dict[str, Callable[[], tuple[Any, Any]]] = {
    "ads": _ads_workload,
    "temperature_load": _temperature_load_workload,
}
JUDGES = {"ads": judge_ads, "temperature_load": judge_temperature_load}
