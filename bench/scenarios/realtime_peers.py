"""19. mobile from a Kafka topic into PostgreSQL (fsync on), produced -> row visible: slipstream
in real-time mode beside Spark's own Kafka sink (the engine's floor) and the same job on Flink,
Bytewax and Pathway (issue 39, item 4).

The job: the count of mobile's valid actions per (10-minute tumbling window, action), upserted
by key. For each rate of `rates` (events/s), `reps` rounds with the variants alternated (A B C D
E, then E D C B A, ...), each run on a fresh one-partition topic and a fresh database of one
PostgreSQL server (tests/services.py: fsync, synchronous_commit and full_page_writes at their
defaults), read from the topic's first offset:

- **slipstream**: `slipstream run mobile --trigger real-time:EPOCH --mode update --sink
  postgresql://...` (realtime.measure: `local[3]`, one shuffle partition; the JVM writer
  flushes the latest row per key every `flush_ms`, `slipstream.realtime.flushMs`);
- **spark-kafka** (the floor): the same query with `--sink kafka://...` (Spark's own Kafka
  sink), its records read back by a consumer;
- **flink**: bench/peers/flink_mobile.py, Kafka SQL connector -> TUMBLE with early fire on every
  element -> the JDBC connector (upsert, a batch every `flush_ms` or 1,000 rows);
- **bytewax**: bench/peers/bytewax_mobile.py, KafkaSource -> per-batch counts -> a psycopg
  upsert per output batch, one transaction;
- **pathway**: bench/peers/pathway_mobile.py, pw.io.kafka.read (commits every 20 ms) ->
  incremental tumbling windowby -> pw.io.postgres.write (snapshot).

A run (realtime.observe): once the engine shows a warm-up record's row, a producer sends `rate`
actions a second, `ts` = now, for `warmup_s` + `seconds` s (the records due every `tick_ms`,
`linger.ms` = `linger_ms`, both 1 by default; 0 and 0 send one record per request, as runs
before section 55 did); the table is read every `poll_ms`.
The first `warmup_s` seconds of records are the stated warm-up (the JVMs' JIT, Python's first
batches) and are left out; p50/p95/p99/max over the rest, and `steady` = the p50 of the last 20 s
over the p50 of the first 20 s after the warm-up (1.0 = no growth). `equal`: the table at the
end holds exactly the counts of the records sent (each engine judged the same way). A table row
per (rate, engine) gives the medians over its runs; the runs' own rows follow.

slipstream's writer and Flink's JDBC connector flush every `flush_ms` (`--set flush_ms=N`,
default slipstream's own default, `slipstream.realtime.flushMs`); a variant named `engine:N`
(`slipstream:20`, `flink:5`) runs that engine with N ms instead, so one run can alternate the
intervals of both.

`--set pin=true` splits the machine: the engine under test on core 0, and the broker, the
database server, the producer and the poller on the other cores (bench/procs.py, split_cores),
so that the load generator and the broker do not take the engine's CPU."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from bench.core import REPO, Context, Result, load_average, median
from bench.procs import Proc, split_cores
from bench.scenarios.kafka_latency import FLINK_JAR, peer_python
from bench.scenarios.realtime import PgCounts, measure, observe, producer_params, summary
from slipstream.sinks.jvm_rows import FLUSH_MS, FLUSH_MS_CONF

NAME = "realtime_peers"
TITLE = "mobile Kafka -> PostgreSQL (fsync on): slipstream real-time, Spark's Kafka sink, peers"
VARIANTS = ("slipstream", "spark-kafka", "flink", "bytewax", "pathway")
PEERS = ("flink", "bytewax", "pathway")
JARS = REPO / ".venv-peers" / "jars"
#: Flink's JDBC connector for Flink 2.x (the only 2.x build on Maven Central) and its driver
FLINK_JDBC = (
    JARS / "flink-connector-jdbc-core-4.0.0-2.0.jar",
    JARS / "flink-connector-jdbc-postgres-4.0.0-2.0.jar",
    JARS / "postgresql-42.7.14.jar",
)
SINKS = {
    "slipstream": "PostgreSQL: JdbcUpsertWriter, latest row per key, a batch + commit per flush",
    "spark-kafka": "a Kafka topic: Spark's own Kafka sink (no database)",
    "flink": "PostgreSQL: Flink's JDBC connector, upsert, a batch per flush or 1,000 rows",
    "bytewax": "PostgreSQL: psycopg executemany upsert per output batch, one transaction",
    "pathway": "PostgreSQL: pw.io.postgres.write (snapshot), a commit per 20 ms of input",
}


def engine_of(variant: str, flush_ms: int) -> tuple[str, int]:
    """`slipstream:20` -> ("slipstream", 20); a bare name -> (name, flush_ms)."""
    name, _, ms = variant.partition(":")
    if name not in VARIANTS or (ms and not ms.isdigit()):
        raise ValueError(f"unknown variant {variant!r}: one of {VARIANTS}, optionally ':MS'")
    if ms and name not in ("slipstream", "flink"):
        raise ValueError(f"{variant!r}: only slipstream and flink take a flush interval")
    return name, int(ms) if ms else flush_ms


def installed(variant: str) -> bool:
    variant = variant.partition(":")[0]
    if variant not in PEERS:
        return True
    jars = (FLINK_JAR, *FLINK_JDBC) if variant == "flink" else ()
    return peer_python(variant).exists() and all(j.exists() for j in jars)


def peer_argv(variant: str, bootstrap: str, topic: str, flush_ms: int) -> list[str]:
    script = REPO / "bench" / "peers" / f"{variant}_mobile.py"
    argv = [str(peer_python(variant)), str(script), f"kafka://{bootstrap}/{topic}", "postgresql"]
    if variant == "flink":
        argv.append("--jars=" + ";".join(f"file://{j}" for j in (FLINK_JAR, *FLINK_JDBC)))
        argv.append(f"--flush-ms={flush_ms}")
    return argv


def peer_run(
    ctx: Context, broker: Any, pg: Any, variant: str, rate: int, flush_ms: int
) -> dict[str, Any]:
    """One peer's run: a fresh topic and database (the table created for it), the peer on it."""
    import psycopg

    from bench.peers.peer_common import MOBILE_TABLE, MOBILE_TABLE_DDL

    topic = broker.create_topic(f"{variant}-{rate}-{int(time.time() * 1000)}", 1)
    work = ctx.scratch(NAME) / topic
    database = pg.create_database(topic.replace("-", "_"))
    env = pg.env(database)
    with psycopg.connect(pg.admin_dsn(database), autocommit=True) as conn:
        conn.execute(MOBILE_TABLE_DDL)
        conn.execute(f"ALTER TABLE {MOBILE_TABLE} OWNER TO {env['PGUSER']}")
    read = PgCounts(pg.admin_dsn(database))
    proc = Proc(peer_argv(variant, broker.bootstrap, topic, flush_ms), work / "run.log", env)
    try:
        seen = observe(ctx, broker, topic, read, proc, rate)
    finally:
        proc.stop()
        read.close()
    return summary(seen)


def one_run(
    ctx: Context, broker: Any, pg: Any, variant: str, rate: int, epoch: str, flush_ms: int
) -> dict[str, Any]:
    load = load_average()[0]
    engine, flush_ms = engine_of(variant, flush_ms)
    if engine == "slipstream":
        flush = ("--conf", f"{FLUSH_MS_CONF}={flush_ms}")
        row = measure(ctx, broker, variant, f"real-time:{epoch}", pg, rate=rate, extra=flush)
    elif engine == "spark-kafka":
        row = measure(ctx, broker, variant, f"real-time:{epoch}", to_kafka=True, rate=rate)
    else:
        row = peer_run(ctx, broker, pg, engine, rate, flush_ms)
    row.pop("variant", None)
    return {
        "rate": rate,
        "engine": variant,
        **({"flush_ms": flush_ms} if engine in ("slipstream", "flink") else {}),
        **row,
        "load1_before_after": f"{load:.1f} -> {load_average()[0]:.1f}",
    }


MEDIANS = ("sent_per_s", "p50_ms", "p95_ms", "p99_ms", "max_ms", "p50_first_ms", "p50_last_ms")


def medians(runs: list[dict[str, Any]], rate: int, variant: str) -> dict[str, Any]:
    mine = [r for r in runs if r["rate"] == rate and r["engine"] == variant]
    row: dict[str, Any] = {"rate": rate, "engine": variant, "runs": len(mine)}
    for metric in MEDIANS:
        values = [r[metric] for r in mine if r.get(metric) is not None]
        row[metric] = round(median(values)) if values else None
    steady = [r["steady"] for r in mine if r.get("steady") is not None]
    row["steady"] = round(median(steady), 2) if steady else None
    row["all_equal"] = bool(mine) and all(r["equal"] for r in mine)
    return row


def headline(result: Result, table: list[dict[str, Any]], rates: list[int]) -> None:
    for rate in rates:
        mine = {r["engine"]: r for r in table if r["rate"] == rate}
        for v, r in mine.items():
            result.headline[f"{v} at {rate:,}/s: p50 / p95 / p99 ms"] = (
                f"{r['p50_ms']} / {r['p95_ms']} / {r['p99_ms']}"
            )
        for mine_v, base in mine.items():
            if not mine_v.startswith("slipstream") or not base["p50_ms"]:
                continue
            for v, r in mine.items():
                if v.startswith(("spark-kafka", "flink")) and r["p50_ms"]:
                    result.headline[f"{mine_v} / {v} p50 at {rate:,}/s"] = round(
                        base["p50_ms"] / r["p50_ms"], 2
                    )


def run(ctx: Context) -> Result:
    from tests.services import running_postgres

    from slipstream.tools.kafka_broker import BrokerError, KafkaBroker

    result = Result(NAME, TITLE)
    rates = [int(r) for r in ctx.param("rates", [1_000], [1_000, 5_000, 10_000])]
    reps = int(ctx.param("reps", 1, 2))
    epoch = str(ctx.param("epoch", "5s", "5s"))
    flush_ms = int(ctx.param("flush_ms", FLUSH_MS, FLUSH_MS))
    wanted = list(ctx.param("variants", list(VARIANTS), list(VARIANTS)))
    for variant in wanted:
        engine_of(variant, flush_ms)  # an unknown name fails before anything starts
    absent = [v for v in wanted if not installed(v)]
    wanted = [v for v in wanted if v not in absent]
    if absent:
        result.notes.append(f"not installed: {', '.join(absent)} (make bench-peers)")
    result.params = {
        "rates": rates,
        "reps": reps,
        "seconds": ctx.param("seconds", 20, 60),
        "warmup_s": ctx.param("warmup_s", 10, 30),
        "poll_ms": ctx.param("poll_ms", 5, 5),
        "epoch": epoch,
        "flush_ms": flush_ms,
        "variants": wanted,
        "sinks": {v: SINKS[engine_of(v, flush_ms)[0]] for v in wanted},
        "pg": "fsync, synchronous_commit, full_page_writes at their defaults (on)",
        "topic": "one partition, fresh per run, read from the first offset",
        "producer": producer_params(ctx),
    }
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        # `pin`: the engine on core 0, the broker, PostgreSQL, producer and poller on the rest
        if ctx.param("pin", False, False):
            others = stack.enter_context(split_cores({0}))
            result.params["cores"] = f"engine: core 0; broker, database, load: {sorted(others)}"
        try:
            broker = KafkaBroker(base=Path(ctx.scratch("broker"))).start()
        except (BrokerError, OSError) as exc:
            result.skipped = f"no Kafka broker: {exc}"
            return result
        stack.callback(broker.stop)
        pg = stack.enter_context(running_postgres())
        if isinstance(pg, str):
            result.skipped = f"no PostgreSQL: {pg}"
            return result
        for rate in rates:
            for rep in range(reps):
                for variant in wanted if rep % 2 == 0 else list(reversed(wanted)):
                    ctx.log(f"  {variant} at {rate:,} events/s, round {rep + 1}")
                    try:
                        runs.append(one_run(ctx, broker, pg, variant, rate, epoch, flush_ms))
                        ctx.log(f"    {runs[-1]}")
                    except Exception as exc:  # noqa: BLE001 - one engine must not hide the rest
                        result.notes.append(f"{variant} at {rate:,}/s failed: {str(exc)[:600]}")
                        ctx.log(f"    failed: {str(exc)[:600]}")
    table = [medians(runs, rate, v) for rate in rates for v in wanted]
    for row in table:
        result.add(**row)
    headline(result, table, rates)
    runs_section = Result(f"{NAME} runs", "every run, in the order run")
    for r in runs:
        runs_section.add(**r)
    result.sections.append(runs_section)
    result.notes.append(
        "latency = the first read of the table (or the floor's output topic) every poll_ms that "
        "shows the record counted, minus when the producer was handed the record; the first "
        "warmup_s seconds of records are the warm-up, left out; steady = p50 of the last 20 s / "
        "p50 of the first 20 s after the warm-up; medians over the runs of each engine"
    )
    return result
