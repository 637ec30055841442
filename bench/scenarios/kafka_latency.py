"""18. trending from a Kafka topic: latency produced -> row visible in PostgreSQL, slipstream
(micro-batches, default trigger) beside Flink, Bytewax and Pathway on the same kind of topic;
and slipstream's throughput from a topic against the same job from files (issue 27, Measure).

One broker (slipstream.tools.kafka_broker) and one PostgreSQL (tests/services.py) for the run.

**Latency**: for each rate of `rates` and each variant (alternated: A B C D, then D C B A), a
fresh one-partition topic and a fresh database; the engine is launched on the topic (read from
its first offset) and a warm-up marker is sent; once its row is visible, bench.kafkaload's
producer sends `rate` events a second with `ts` = now for `seconds` seconds, a marker every
`marker_every` s. A marker's latency = the first poll (every `poll_ms`) that shows a row of its
article minus when the producer handed it to the client; the first `settle_s` seconds of markers
are left out. The variants and where their rows land:

- **slipstream**: `slipstream run trending --input events=kafka://...?startingOffsets=earliest
  --input catalog=CSV --sink postgresql` (libpq's variables), the default trigger (a micro-batch
  as soon as the previous one ends), its table `article_views` (update mode, upsert);
- **slipstream-rt**: trending's real-time form, the same command with `--trigger
  real-time:EPOCH` (`epoch`, default Spark's 5m) and `--mode update` (`--dedup auto`:
  `dropDuplicates` by `(event_id, ts)`), `local[4]` and one shuffle partition (a slot for the
  partition, the deduplication's and the aggregation's shuffle, and the quarantine's batches);
  its rows go through the JVM writer (the latest row per key, a batch and a commit per 20 ms);
- **bytewax**: Bytewax's KafkaSource -> per-batch counts -> psycopg upsert into `peer_views`;
- **pathway**: pw.io.kafka.read -> incremental windowby -> pw.io.postgres.write (snapshot) into
  `peer_views`;
- **flink**: the Kafka SQL connector -> HOP group window with early fire on every element ->
  the print sink, a file, tailed (Flink's JDBC connector, its way to PostgreSQL, is not wired in
  yet: flink-connector-jdbc-core/-postgres 4.0.0-2.0, built for Flink 2.0).

**Throughput**: scenario 3's data (`events` lines, dirt included) produced in order into a topic
of one partition, then `slipstream run trending --trigger available-now` from the topic and from
the same files (alternated), each to SQLite; wall time, events/s and the output rows compared."""

from __future__ import annotations

import csv
import math
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core import REPO, Context, Result, alternate, load_average, median
from bench.kafkaload import (
    FileMarkerPoller,
    PacedProducer,
    PgMarkerPoller,
    marker_record,
    produce,
    produce_lines,
    producer_client,
)
from bench.procs import Proc, group_cpu_seconds, slipstream_command
from bench.scenarios.realtime import CONNECTOR
from bench.stage import param_args

NAME = "kafka_latency"
TITLE = "trending from Kafka: latency to PostgreSQL beside Flink, Bytewax, Pathway; throughput"
IN_PROCESS = False
VARIANTS = ("slipstream", "slipstream-rt", "flink", "bytewax", "pathway")
OURS = ("slipstream", "slipstream-rt")
FLINK_JAR = REPO / ".venv-peers" / "jars" / "flink-sql-connector-kafka-5.0.0-2.2.jar"
SINKS = {
    "slipstream": "PostgreSQL, table article_views (its own sink: staging + ledger, upsert)",
    "slipstream-rt": "PostgreSQL, table article_views (real time: the JVM writer, upsert by key)",
    "flink": "the print sink, a file (its JDBC connector: mobile only, realtime_peers)",
    "bytewax": "PostgreSQL, table peer_views (a psycopg upsert per output batch, in the script)",
    "pathway": "PostgreSQL, table peer_views (pw.io.postgres.write, snapshot)",
}


def peer_python(variant: str) -> Path:
    return REPO / ".venv-peers" / variant / "bin" / "python"


def catalog_articles(catalog: Path) -> list[str]:
    with catalog.open(encoding="utf-8", newline="") as handle:
        return [r["article_id"] for r in csv.DictReader(handle)]


class Services:
    """The broker and PostgreSQL of the run, and what a run needs from them."""

    def __init__(self, ctx: Context) -> None:
        from tests.services import PostgresServer

        from slipstream.tools.kafka_broker import KafkaBroker

        self.broker = KafkaBroker(base=ctx.scratch("broker")).start()
        try:
            self.pg = PostgresServer().start()
        except Exception:
            self.broker.stop()
            raise

    def database(self, name: str, peer_table: bool) -> dict[str, str]:
        """A fresh database; its libpq variables (the application role)."""
        import psycopg

        self.pg.create_database(name)
        env = self.pg.env(name)
        if peer_table:
            from bench.peers.peer_common import PEER_TABLE_DDL

            with psycopg.connect(self.pg.admin_dsn(name), autocommit=True) as conn:
                conn.execute(PEER_TABLE_DDL)
                conn.execute(f"ALTER TABLE peer_views OWNER TO {env['PGUSER']}")
        return env

    def stop(self) -> None:
        self.pg.destroy()
        self.broker.stop()


def command(
    variant: str,
    services: Services,
    topic: str,
    catalog: Path,
    work: Path,
    epoch: str = "5m",
    stage: tuple[str, ...] = (),
) -> tuple[list[str], Path | None]:
    """The engine's command line, and the file its rows land in (None: PostgreSQL)."""
    if variant in OURS:
        url = services.broker.url(topic, startingOffsets="earliest")
        argv = slipstream_command(
            *("run", "trending", "--input", f"events={url}", "--input", f"catalog={catalog}"),
            *("--state-dir", work / "state", "--sink", "postgresql", *stage),
        )
        if variant == "slipstream-rt":
            argv += ["--trigger", f"real-time:{epoch}", "--mode", "update", "--master", "local[4]"]
            argv += ["--conf", "spark.sql.shuffle.partitions=1"]
        return argv, None
    script = REPO / "bench" / "peers" / f"{variant}_trending.py"
    events = f"kafka://{services.broker.bootstrap}/{topic}"
    if variant == "flink":
        out = work / "rows.txt"
        argv = [str(peer_python(variant)), str(script), events, str(catalog), str(out), "1"]
        return [*argv, f"--jars=file://{FLINK_JAR}"], out
    return [str(peer_python(variant)), str(script), events, str(catalog), "postgresql"], None


def ms(seconds: float) -> int:
    return round(seconds * 1000)


def latency_one(
    ctx: Context, services: Services, variant: str, rate: int, catalog: Path
) -> dict[str, Any]:
    seconds = float(ctx.param("seconds", 20, 60))
    every = float(ctx.param("marker_every", 0.1, 0.1))
    poll = float(ctx.param("poll_ms", 20, 20)) / 1000
    settle = float(ctx.param("settle_s", 3, 5))
    drain = float(ctx.param("drain_s", 30, 60))
    tag = f"{variant}_{rate}_{int(time.time())}"
    topic = services.broker.create_topic(f"views-{tag}", 1)
    work = ctx.scratch(f"latency/{tag}")
    env = services.database(f"kl_{tag}", peer_table=variant not in OURS)
    epoch = str(ctx.param("epoch", "5m", "5m"))
    argv, out = command(variant, services, topic, catalog, work, epoch, param_args(ctx))
    if variant in OURS:
        env["SLIPSTREAM_KAFKA_CONNECTOR"] = os.environ.get("SLIPSTREAM_KAFKA_CONNECTOR", CONNECTOR)
        table = "article_views"
    else:
        table = "peer_views"
    poller = (
        FileMarkerPoller(out, poll)
        if out is not None
        else PgMarkerPoller(services.pg.admin_dsn(env["PGDATABASE"]), table, poll)
    )
    client = producer_client(services.broker.bootstrap)
    proc = Proc(argv, work / "run.log", env)
    load = [load_average()[0]]
    try:
        poller.start()
        produce(client, topic, marker_record(0, datetime.now(UTC)))
        client.flush(30)
        timeout = float(ctx.param("startup_timeout", 300, 300))
        if not poller.wait_for([0], timeout, proc.alive):
            raise RuntimeError(f"{variant}: the warm-up marker never showed\n{proc.tail(25)}")
        startup = poller.seen[0] - proc.launched
        cpu0 = group_cpu_seconds(proc.popen.pid)
        producer = PacedProducer(client, topic, catalog_articles(catalog), rate, seconds, every)
        producer.start().join(seconds + 120)
        cpu = group_cpu_seconds(proc.popen.pid) - cpu0
        pacing = producer.ended - producer.began
        drained = poller.wait_for(sorted(producer.sent), drain, proc.alive)
        seen = dict(poller.seen)  # what was visible by the end of the drain
        load.append(load_average()[0])
    finally:
        proc.stop()
        poller.stop()
    first = producer.began + settle
    lat = {k: seen[k] - t for k, t in producer.sent.items() if t >= first and k in seen}
    counted = [k for k, t in producer.sent.items() if t >= first]
    values = [lat[k] for k in sorted(lat)]
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else []
    third = max(1, len(values) // 3)
    return {
        "rate": rate,
        "engine": variant,
        "sink": SINKS[variant].split(",")[0].split(" (")[0],
        "startup_s": round(startup, 1),
        "events_sent": producer.events,
        "sent_per_s": round(producer.events / pacing) if pacing else math.nan,
        "markers": len(counted),
        "markers_visible": len(values),
        "p50_ms": ms(cuts[49]) if cuts else math.nan,
        "p95_ms": ms(cuts[94]) if cuts else math.nan,
        "p99_ms": ms(cuts[98]) if cuts else math.nan,
        "max_ms": ms(max(values)) if values else math.nan,
        "drift_ms": ms(median(values[-third:]) - median(values[:third])) if values else math.nan,
        "drained": drained,
        "cpu_cores": round(cpu / pacing, 2) if pacing else math.nan,
        "load1_before_after": f"{load[0]:.1f} -> {load[-1]:.1f}",
        "polls": poller.polls,
    }


def latency(ctx: Context, services: Services) -> Result:
    from slipstream.tools.generators import TrendingSpec
    from slipstream.tools.generators.trending import write_catalog

    result = Result(f"{NAME} latency", "produced -> row visible, p50/p95/p99, alternated")
    rates = list(ctx.param("rates", [1_000], [1_000, 10_000]))
    wanted = list(ctx.param("variants", list(VARIANTS), list(VARIANTS)))
    absent = [v for v in wanted if v not in OURS and not peer_python(v).exists()]
    if "flink" in wanted and not FLINK_JAR.exists():
        absent.append("flink")
    wanted = [v for v in wanted if v not in absent]
    if absent:
        result.notes.append(
            f"not installed: {', '.join(absent)} (make bench-peers; Flink also needs {FLINK_JAR})"
        )
    catalog = write_catalog(ctx.work / "catalog.csv", TrendingSpec())
    result.params = {
        "rates": rates,
        "seconds": ctx.param("seconds", 20, 60),
        "marker_every_s": ctx.param("marker_every", 0.1, 0.1),
        "poll_ms": ctx.param("poll_ms", 20, 20),
        "settle_s": ctx.param("settle_s", 3, 5),
        "drain_s": ctx.param("drain_s", 30, 60),
        "variants": wanted,
        "sinks": {v: SINKS[v] for v in wanted},
        "topic": "one partition, fresh per run, read from the first offset",
        "producer": "confluent-kafka, linger.ms 5, acks 1, 10 ms ticks, ts = now",
    }
    reps = int(ctx.param("reps", 1, 1))
    result.params["reps"] = reps
    turn = 0
    for rate in rates:
        for _ in range(reps):  # A B C D, then D C B A, ...
            for variant in wanted if turn % 2 == 0 else list(reversed(wanted)):
                ctx.log(f"  {variant} at {rate:,} events/s")
                try:
                    row = latency_one(ctx, services, variant, rate, catalog)
                    result.add(**row)
                    ctx.log(f"    {row}")
                except Exception as exc:  # noqa: BLE001 - one engine must not hide the rest
                    result.notes.append(f"{variant} at {rate:,}/s failed: {str(exc)[:600]}")
                    ctx.log(f"  {variant} at {rate:,}/s failed: {str(exc)[:600]}")
            turn += 1
    for rate in rates:
        runs = [r for r in result.rows if r["rate"] == rate]
        mine = {
            v: {k: median([r[k] for r in runs if r["engine"] == v]) for k in ("p50_ms", "p99_ms")}
            for v in dict.fromkeys(r["engine"] for r in runs)
        }
        for v, r in mine.items():
            result.headline[f"{v} at {rate:,}/s: p50 / p99 ms (median of runs)"] = (
                f"{r['p50_ms']} / {r['p99_ms']}"
            )
        for ours in OURS:
            base = mine.get(ours)
            for v, r in mine.items():
                if base is not None and v not in OURS and r["p50_ms"] and r["p99_ms"]:
                    result.headline[f"{ours} / {v} at {rate:,}/s: p50, p99"] = (
                        f"{base['p50_ms'] / r['p50_ms']:.2f}x, {base['p99_ms'] / r['p99_ms']:.2f}x"
                    )
    return result


def throughput(ctx: Context, services: Services) -> Result:
    from bench.peerruns import measure
    from bench.scenarios.flagship import table_rows
    from bench.workloads import generate_trending, land_all

    result = Result(f"{NAME} throughput", "trending available-now: a topic against files")
    events = ctx.param("events", 100_000, 1_000_000)
    reps = ctx.param("reps", 1, 1)
    data = generate_trending(ctx.work / "tp-input", events, 2000.0, markers=False)
    landing = ctx.work / "tp-landing"
    topic = services.broker.create_topic(f"tp-{int(time.time())}", 1)
    began = time.monotonic()
    produced = produce_lines(services.broker.bootstrap, topic, data.files)
    produce_s = time.monotonic() - began
    land_all(data, landing)
    result.params = {
        "events": data.total_lines,
        "files": len(data.files),
        "records": produced,
        "produce_s": round(produce_s, 1),
        "topic": "one partition, every line of the files in order, one record a line",
        "repetitions": reps,
    }
    url = services.broker.url(topic, startingOffsets="earliest")
    os.environ.setdefault("SLIPSTREAM_KAFKA_CONNECTOR", CONNECTOR)
    dbs: dict[str, Path] = {}

    def one(variant: str, rep: int) -> dict[str, Any]:
        work = ctx.scratch(f"tp/{variant}-{rep + 1}")
        dbs[variant] = work / "out.db"
        source = f"events={url}" if variant == "kafka" else f"events={landing}"
        argv = slipstream_command(
            *("run", "trending", "--input", source, "--input", f"catalog={data.catalog}"),
            *("--trigger", "available-now", "--state-dir", work / "state"),
            *("--sink", f"sqlite:{dbs[variant]}", *param_args(ctx)),
        )
        timeout = float(ctx.param("timeout", 900, 3600))
        return measure(argv, work / "run.log", data.total_lines, timeout)

    runs = alternate(["files", "kafka"], one, reps, warmup=False, log=ctx.log)
    tables = {v: table_rows(db) for v, db in dbs.items()}
    for v in ("files", "kafka"):
        mine = [r for r in runs if r["variant"] == v]
        row = {"input": v, "events": data.total_lines}
        for metric in ("wall_s", "events_per_s", "startup_s", "processing_s", "cpu_s"):
            row[metric] = median([r[metric] for r in mine])
        row["peak_rss_mib"] = median([r["peak_rss_mib"] for r in mine])
        row["output_rows"] = len(tables[v])
        row["rows = files"] = tables[v] == tables["files"]
        result.add(**row)
    f, k = result.rows
    result.headline["kafka / files, events/s (launch to exit)"] = (
        f"{k['events_per_s'] / f['events_per_s']:.2f}"
    )
    return result


def run(ctx: Context) -> Result:
    from slipstream.tools.kafka_broker import BrokerError

    result = Result(NAME, TITLE)
    parts = list(ctx.param("parts", ["latency", "throughput"], ["latency", "throughput"]))
    try:
        services = Services(ctx)
    except (BrokerError, OSError, RuntimeError) as exc:
        result.skipped = f"no Kafka broker or PostgreSQL: {exc}"
        return result
    try:
        if "latency" in parts:
            result.sections.append(latency(ctx, services))
        if "throughput" in parts:
            result.sections.append(throughput(ctx, services))
    finally:
        services.stop()
    return result
