"""trending on Apache Flink (PyFlink, Table API / SQL, local mini-cluster, streaming mode):
python flink_trending.py EVENTS_DIR CATALOG OUT_CSV [PARALLELISM].

Everything runs in Flink's JVM (no Python UDF):
- source: the `filesystem` connector, format `json` with `json.ignore-parse-errors` (a line
  that is not JSON is skipped; a missing field is NULL; an object or array in a STRING field
  becomes its JSON text, which the `article_id` shape check then rejects);
- `ts`: the three encodings the generator writes (`...sss`, `...sssZ`, `...sss+hh:mm`) parsed
  with TO_TIMESTAMP and TRY_CAST into a UTC TIMESTAMP(3) (NULL when invalid); the rowtime is
  that time, or the epoch for an invalid row (a rowtime cannot be NULL; the epoch never moves
  the watermark and the row is filtered out right after);
- `WATERMARK FOR rowtime AS rowtime - INTERVAL '10' MINUTE`;
- the rules: event_id, article_id and ts present, article_id `^a[0-9]+$`, ts at most a day ahead;
- dedup: ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY proctime) = 1, Flink's deduplication
  (keeps the first row; its state is kept for `table.exec.state.ttl` = 10 min of processing
  time: Flink SQL bounds dedup state by processing time, not by the event-time watermark);
- HOP(rowtime, 1 min, 10 min) window TVF, COUNT(*) per (window, article_id): a row whose
  window has already fired by the watermark is dropped as late;
- LEFT JOIN to the catalog (the same connector, format csv): a regular join, so its result is a
  changelog; `execute().collect()` applies it and the final rows are written as CSV.

Live mode (`--live [--early-fire=DELAY]`, OUT = the live output): the source also has
`source.monitor-interval` = 1 s (it lists the folder every second and reads the new files,
never ending), and the counts are a group-window aggregation `GROUP BY HOP(rowtime, 1 min,
10 min), article_id` with `table.exec.emit.early-fire.enabled` and delay DELAY (default 0 s:
fire on every element): it emits a window's count before the watermark passes the window's end,
as an update of the same row (a window-TVF aggregation fires only at the window's end, 20
minutes of event time after an event). The joined changelog goes to Flink's `print` sink, in
the JVM, whose standard output is OUT (the program points its file descriptor 1 at OUT before
the JVM starts): one line a change, `+I[article_id, window_start, views]` / `-U[...]` /
`+U[...]`, flushed per line (the program's own marks after start-up land there too). (`collect()`
to Python was tried first: with a row per count update it fell behind at 1,000 events/s in
development, on a loaded machine; not investigated further.)

Kafka mode (EVENTS = `kafka://HOST:PORT/TOPIC`, `--jars=file:///...jar` = Flink's Kafka SQL
connector, flink-sql-connector-kafka from Maven Central): the events table is the `kafka`
connector (format json as above, `scan.startup.mode` = earliest-offset) and the rest is live
mode, the rows going to the print sink, i.e. the file OUT. (Flink's way to PostgreSQL would
be its JDBC connector: for Flink 2.x, flink-connector-jdbc-core and -postgres 4.0.0-2.0 on Maven
Central, built for 2.0, with the PostgreSQL driver; wired in for mobile's job only,
flink_mobile.py, so here Flink's rows skip the database transaction the other engines pay.)"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from peer_common import EPOCH, arguments, kafka_topic, mark, write_rows
from pyflink.common import RowKind
from pyflink.table import EnvironmentSettings, TableEnvironment

LOCAL = "TO_TIMESTAMP(SUBSTRING(ts FROM 1 FOR 23), 'yyyy-MM-dd''T''HH:mm:ss.SSS')"
OFFSET_MINUTES = (
    "CASE WHEN CHAR_LENGTH(ts) = 23 THEN 0 "
    "WHEN CHAR_LENGTH(ts) = 24 AND SUBSTRING(ts FROM 24) = 'Z' THEN 0 "
    "WHEN CHAR_LENGTH(ts) = 29 AND SUBSTRING(ts FROM 27 FOR 1) = ':' THEN "
    "(CASE SUBSTRING(ts FROM 24 FOR 1) WHEN '+' THEN 1 WHEN '-' THEN -1 END) * "
    "(TRY_CAST(SUBSTRING(ts FROM 25 FOR 2) AS INT) * 60 "
    "+ TRY_CAST(SUBSTRING(ts FROM 28 FOR 2) AS INT)) END"
)
PARSED = f"TIMESTAMPADD(MINUTE, -({OFFSET_MINUTES}), {LOCAL})"
EARLY_FIRE = "0 s"  # Flink: 0 = fire on every element (each update of a count is emitted)
HOP_LEGACY = "HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '10' MINUTE)"
LIVE_COUNTS = f"""CREATE TEMPORARY VIEW counts AS
     SELECT HOP_START{HOP_LEGACY[3:]} AS window_start, HOP_END{HOP_LEGACY[3:]} AS window_end,
            article_id, COUNT(*) AS `views`
     FROM uniq GROUP BY {HOP_LEGACY}, article_id"""


def source_options(events: str, live: bool) -> str:
    """The events table's connector: the folder (filesystem) or, Kafka mode, the topic."""
    topic = kafka_topic(events)
    if topic is None:
        monitor = ", 'source.monitor-interval' = '1 s'" if live else ""
        return f"'connector' = 'filesystem', 'path' = 'file://{events}'{monitor}"
    return (
        f"'connector' = 'kafka', 'topic' = '{topic[1]}', "
        f"'properties.bootstrap.servers' = '{topic[0]}', 'properties.group.id' = 'flink', "
        "'scan.startup.mode' = 'earliest-offset'"
    )


def statements(events: str, catalog: Path, live: bool = False) -> list[str]:
    return [
        f"""CREATE TABLE events (
              event_id STRING, article_id STRING, user_id STRING, ts STRING,
              parsed AS {PARSED},
              rowtime AS COALESCE({PARSED}, TIMESTAMP '1970-01-01 00:00:00.000'),
              proc AS PROCTIME(),
              WATERMARK FOR rowtime AS rowtime - INTERVAL '10' MINUTE
            ) WITH ({source_options(events, live)}, 'format' = 'json',
                    'json.ignore-parse-errors' = 'true',
                    'json.fail-on-missing-field' = 'false')""",
        f"""CREATE TABLE catalog (
              article_id STRING, title STRING, section STRING, published_at STRING
            ) WITH ('connector' = 'filesystem', 'path' = 'file://{catalog}', 'format' = 'csv',
                    'csv.ignore-first-line' = 'true')""",
        """CREATE TEMPORARY VIEW valid AS
             SELECT event_id, article_id, rowtime, proc FROM events
             WHERE event_id IS NOT NULL AND article_id IS NOT NULL AND parsed IS NOT NULL
               AND REGEXP(article_id, '^a[0-9]+$')
               AND parsed <= TIMESTAMPADD(DAY, 1, CAST(CURRENT_TIMESTAMP AS TIMESTAMP(3)))""",
        """CREATE TEMPORARY VIEW uniq AS
             SELECT event_id, article_id, rowtime FROM (
               SELECT *, ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY proc ASC) AS rn
               FROM valid) WHERE rn = 1""",
        """CREATE TEMPORARY VIEW counts AS
             SELECT window_start, window_end, article_id, COUNT(*) AS `views`
             FROM TABLE(HOP(TABLE uniq, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE,
                            INTERVAL '10' MINUTE))
             GROUP BY window_start, window_end, article_id"""
        if not live
        else LIVE_COUNTS,
    ]


QUERY = """SELECT c.window_start, c.window_end, c.article_id, k.title, k.section, c.`views`,
                  k.article_id IS NOT NULL AS in_catalog
           FROM counts AS c LEFT JOIN catalog AS k ON c.article_id = k.article_id"""


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


LIVE_SINK = """CREATE TABLE live_out (article_id STRING, window_start STRING, `views` BIGINT)
               WITH ('connector' = 'print')"""
LIVE_INSERT = """INSERT INTO live_out
    SELECT c.article_id, CAST(c.window_start AS STRING), c.`views`
    FROM counts AS c LEFT JOIN catalog AS k ON c.article_id = k.article_id"""


def live_rows(env: TableEnvironment) -> None:
    """The joined changelog to the print sink (standard output = OUT); never ends."""
    env.execute_sql(LIVE_SINK)
    env.execute_sql(LIVE_INSERT).wait()


def main(
    events: str,
    catalog: str,
    out: str,
    parallelism: str = "1",
    live: bool = False,
    early_fire: str = EARLY_FIRE,
    jars: str = "",
) -> None:
    mark("started")
    kafka = kafka_topic(events)
    live = live or kafka is not None
    if kafka is None:
        events = str(Path(events).resolve())
    if live:  # the JVM, started below, inherits this standard output: the print sink's rows
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.close(fd)
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", parallelism)
    conf.set("table.local-time-zone", "UTC")
    conf.set("table.exec.state.ttl", "10 min")
    if jars:
        conf.set("pipeline.jars", jars)
    if live:
        conf.set("table.exec.emit.early-fire.enabled", "true")
        conf.set("table.exec.emit.early-fire.delay", early_fire)
    for sql in statements(events, Path(catalog).resolve(), live):
        env.execute_sql(sql)
    mark("reading")
    if live:
        live_rows(env)
        return
    rows: dict[tuple[Any, ...], int] = {}
    with env.execute_sql(QUERY).collect() as results:
        for r in results:
            key = (iso(r[0]), iso(r[1]), r[2], r[3] or "", r[4] or "", int(r[5]), bool(r[6]))
            step = -1 if r.get_row_kind() in (RowKind.UPDATE_BEFORE, RowKind.DELETE) else 1
            rows[key] = rows.get(key, 0) + step
    write_rows(Path(out), sorted(k for k, n in rows.items() if n > 0))
    mark("done")
    assert EPOCH  # (shared constants; the SQL spells the same 10 min / 1 min)


if __name__ == "__main__":
    positional, live_mode, options = arguments(sys.argv[1:])
    main(
        *positional[:4],
        live=live_mode,
        early_fire=options.get("early-fire", EARLY_FIRE),
        jars=options.get("jars", ""),
    )
