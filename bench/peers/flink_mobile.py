"""mobile on Apache Flink (PyFlink, Table API / SQL, local mini-cluster, streaming mode), from
Kafka into PostgreSQL through Flink's JDBC connector: python flink_mobile.py
kafka://HOST:PORT/TOPIC postgresql --jars=file:///a.jar;file:///b.jar [--flush-ms=20]
(libpq's variables PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, or a postgresql:// URL).

Everything runs in Flink's JVM (no Python UDF), parallelism 1:
- source: the `kafka` SQL connector (flink-sql-connector-kafka), format `json` with
  `json.ignore-parse-errors`, from the earliest offset;
- `ts` (`...ss.ffffffZ`, `...ss.fff`, with or without a zone as the producer writes it) cast
  to TIMESTAMP(3) after dropping the `T` and a trailing `Z` (TRY_CAST: NULL when unreadable,
  and the row is filtered out);
- the count per (10-minute tumbling window start, action) as a regular `GROUP BY` on the
  window's start (`FLOOR(ts TO MINUTE)` less the minutes past a multiple of 10): each record
  emits its key's new count at once, as an update of the row, Flink's counterpart of real-time
  update mode. Where it differs from mobile: a record later than the watermark still counts
  (a key's state is dropped `table.exec.state.ttl` = 20 min after its last update, not by event
  time); the benchmark's records carry `ts` = now, so none is late. (A `TUMBLE` group window
  with early fire on every element was the first form: Flink 2.3 derives no upsert key for it,
  and a JDBC sink with a primary key refuses it without an ON CONFLICT clause, whose
  DEDUPLICATE keeps the whole history in state);
- sink: the `jdbc` connector (flink-connector-jdbc-core and -postgres 4.0.0-2.0, the 2.x build on
  Maven Central, with the PostgreSQL driver) into `mobile_action_counts` with PRIMARY KEY
  (window_start, action) NOT ENFORCED: an upsert (`INSERT ... ON CONFLICT DO UPDATE`) per
  changed key, buffered and written as one JDBC batch every `sink.buffer-flush.interval` =
  `--flush-ms` (default 20 ms, slipstream's real-time writer's default flushMs) or 1,000 rows
  (`sink.buffer-flush.max-rows`, slipstream's flushKeys). The password reaches the table's
  options from PGPASSWORD and is never printed."""

from __future__ import annotations

import sys

from peer_common import MOBILE_TABLE, arguments, kafka_topic, mark, pg_settings
from pyflink.table import EnvironmentSettings, TableEnvironment

TS = "TRY_CAST(REPLACE(REPLACE(SUBSTRING(ts FROM 1 FOR 26), 'T', ' '), 'Z', '') AS TIMESTAMP(3))"
#: the start of the 10-minute tumbling window holding `parsed`, as slipstream stores it
WINDOW_START = (
    "DATE_FORMAT(TIMESTAMPADD(MINUTE, -MOD(EXTRACT(MINUTE FROM parsed), 10), "
    "FLOOR(parsed TO MINUTE)), 'yyyy-MM-dd''T''HH:mm:ss''Z''')"
)


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def statements(bootstrap: str, topic: str, out: str, flush_ms: int) -> list[str]:
    pg = pg_settings(out)
    url = f"jdbc:postgresql://{pg['host']}:{pg['port']}/{pg['dbname']}"
    return [
        f"""CREATE TABLE actions (id STRING, action STRING, ts STRING, parsed AS {TS})
            WITH ('connector' = 'kafka', 'topic' = {literal(topic)},
                  'properties.bootstrap.servers' = {literal(bootstrap)},
                  'properties.group.id' = 'flink', 'scan.startup.mode' = 'earliest-offset',
                  'format' = 'json', 'json.ignore-parse-errors' = 'true',
                  'json.fail-on-missing-field' = 'false')""",
        f"""CREATE TABLE counts (
              window_start STRING, action STRING, `count` BIGINT,
              PRIMARY KEY (window_start, action) NOT ENFORCED
            ) WITH ('connector' = 'jdbc', 'url' = {literal(url)},
                    'table-name' = {literal(MOBILE_TABLE)},
                    'username' = {literal(pg["user"])}, 'password' = {literal(pg["password"])},
                    'sink.buffer-flush.interval' = '{flush_ms} ms',
                    'sink.buffer-flush.max-rows' = '1000')""",
        f"""INSERT INTO counts
            SELECT window_start, action, COUNT(*) FROM (
              SELECT {WINDOW_START} AS window_start, action FROM actions
              WHERE id IS NOT NULL AND action IS NOT NULL AND parsed IS NOT NULL)
            GROUP BY window_start, action""",
    ]


def main(events: str, out: str, jars: str, flush_ms: int = 20) -> None:
    mark("started")
    topic = kafka_topic(events)
    if topic is None:
        raise SystemExit(f"flink_mobile reads a kafka://HOST:PORT/TOPIC, got {events!r}")
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("table.local-time-zone", "UTC")
    conf.set("table.exec.state.ttl", "20 min")
    conf.set("pipeline.jars", jars)
    *ddl, insert = statements(*topic, out, flush_ms)
    for sql in ddl:
        env.execute_sql(sql)
    mark("reading")
    env.execute_sql(insert).wait()


if __name__ == "__main__":
    positional, _, options = arguments(sys.argv[1:])
    main(*positional[:2], jars=options["jars"], flush_ms=int(options.get("flush-ms", "20")))
