"""The database sinks in real-time mode, written from the JVM: slipstream's JdbcUpsertWriter.

Real-time mode hands a Python `foreach` its rows in pickled batches that wait for more rows or
the epoch's end, so a Python writer's rows become visible seconds late (docs/benchmarks.md,
section 20). A JVM ForeachWriter receives each row as the task computes it. This module builds
one (java/src/slipstream/jvm/JdbcUpsertWriter.java, in slipstream's jar) for an output into
SQLite or PostgreSQL and puts it on the query's writer through py4j:

    open(partition, epoch)   a JDBC connection, and a flusher thread
    process(row)             the row replaces its key's waiting row, in memory; with
                             `flushKeys` keys waiting, they are written at once
    (every `flushMs`)        the flusher writes the waiting rows: the Python writer's upsert
                             (rows.upsert_statement, `?` marks) as one JDBC batch, one commit
    close(error)             the last flush (none after an error), close the connection

Real-time update mode emits a row per input record, mostly newer values of keys already
waiting: a row per record and a commit each (the writer before this one) reached about 130
rows/s against a PostgreSQL with fsync on (issue 39). Coalesced, the database's work follows
the keys changed per flush, and a row waits at most `flushMs` plus one flush. The settings are
Spark settings (`--conf slipstream.realtime.flushMs=20`, `slipstream.realtime.flushKeys=1000`).
A flush that fails in the flusher thread fails the task at its next row or at its end, with
the codes of a failed row (SINK_WRITE_FAILED; SINK_UNREACHABLE for a lost connection).

It writes the frame the Python writer receives (the sink's `row_frame`: timestamps as ISO-8601
UTC text, nested values as JSON text, PostgreSQL text without NUL, SQLite decimals and dates as
text) into the same table, so the table holds the same values; string parameters go to
PostgreSQL untyped (`stringtype=unspecified`), as psycopg sends them, so each takes its
column's type. The driver (sqlite-jdbc, pgjdbc) comes from `spark.jars.packages`
(settings/jdbc_drivers.py).

The PostgreSQL password reaches the writer as a py4j argument and travels inside the serialized
task; it is in no Spark setting (the UI's properties), no URL, no plan and no message (the
writer's `toString` and errors name the target without it).

The Python writer (rows.UpsertWriter) stays where there is no JVM to talk to (Spark Connect), or
the session started without the driver, or PostgreSQL is reached through a Unix socket (JDBC
speaks TCP only): `jvm_writer` then says why."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import DataStreamWriter

from slipstream.errors import ConfigError
from slipstream.settings.connect import is_connect
from slipstream.sinks.database import DatabaseSink

#: libpq keywords of a sink URL and the pgjdbc property that means the same
PG_PROPERTIES = {
    "application_name": "ApplicationName",
    "connect_timeout": "connectTimeout",
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "options": "options",
}
#: the Spark settings of the writer's flushes, and their defaults
FLUSH_MS_CONF, FLUSH_MS = "slipstream.realtime.flushMs", 20
FLUSH_KEYS_CONF, FLUSH_KEYS = "slipstream.realtime.flushKeys", 1000
#: SQLite connection settings (sqlite-jdbc properties), as the Python writer's `row_connect`
SQLITE_PROPERTIES = {"journal_mode": "WAL", "synchronous": "NORMAL", "busy_timeout": "30000"}


@dataclass(frozen=True)
class JdbcTarget:
    """Where the JVM writer connects: everything but the password is printable."""

    kind: str  # sqlite, postgresql
    driver: str  # the JDBC driver's class (`Sink.jdbc`)
    url: str
    properties: dict[str, str]
    where: str  # for messages
    connect_fix: str
    password: Any = None  # a Secret, or None


@dataclass(frozen=True)
class Flush:
    """When the JVM writer writes its waiting rows: `every_ms` after the last flush, or as
    soon as `max_keys` keys wait."""

    every_ms: int = FLUSH_MS
    max_keys: int = FLUSH_KEYS

    @classmethod
    def from_conf(cls, conf: Callable[[str], str | None]) -> Flush:
        """From the session's settings (`conf(name)`, None when unset)."""
        return cls(
            positive(FLUSH_MS_CONF, conf(FLUSH_MS_CONF), FLUSH_MS),
            positive(FLUSH_KEYS_CONF, conf(FLUSH_KEYS_CONF), FLUSH_KEYS),
        )


def positive(name: str, text: str | None, default: int) -> int:
    """A positive whole number from a setting's text, or `default` when unset."""
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0 or value > 2**31 - 1:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--conf {name} must be a positive whole number; got {text!r}",
            f"drop it (default {default}) or give one, e.g. --conf {name}={default}",
        )
    return value


def jdbc_target(sink: DatabaseSink) -> JdbcTarget | str:
    """The JDBC connection of a SQLite or PostgreSQL sink, or why it has none."""
    kind = sink.spec.kind
    if kind == "sqlite":
        path = Path(sink.path).absolute()  # type: ignore[attr-defined]
        return JdbcTarget(
            kind,
            sink.jdbc.driver_class,  # type: ignore[union-attr]
            f"jdbc:sqlite:{path}",
            dict(SQLITE_PROPERTIES),
            f"SQLite {path}",
            "check that the file's folder is writable and no other program holds a lock on it",
        )
    if kind == "postgresql":
        from slipstream.sinks.postgres_io import FIX_CONNECT

        target = sink.target  # type: ignore[attr-defined]
        if target.host and target.host.startswith("/"):
            return f"PostgreSQL through the Unix socket {target.host} (JDBC connects over TCP)"
        user = target.user or getpass.getuser()  # libpq's defaults
        props = {"user": user, "stringtype": "unspecified", "ApplicationName": "slipstream"}
        for key, value in target.keywords().items():
            if key in PG_PROPERTIES:
                props[PG_PROPERTIES[key]] = str(value)
        url = (
            f"jdbc:postgresql://{target.host or 'localhost'}:{target.port or 5432}/"
            f"{target.dbname or user}"
        )
        where = f"PostgreSQL at {target.where()}"
        driver = sink.jdbc.driver_class  # type: ignore[union-attr]
        return JdbcTarget(kind, driver, url, props, where, FIX_CONNECT, target.password)
    return f"no JDBC writer for a {kind} sink"


def jvm_writer(
    sink: DatabaseSink,
    stored: DataFrame,
    statement: str,
    columns: Sequence[str],
    key: Sequence[str],
    flush: Flush | None = None,
) -> tuple[Any, str | None]:
    """The JVM ForeachWriter for `stored` into `sink` (keyed by `key`, flushing as `flush`
    says, by default as the session's settings say), and None; or None and why the Python
    writer is used instead."""
    if is_connect(stored):
        return None, "Spark Connect: no JVM in this process to hand a writer to"
    target = jdbc_target(sink)
    if isinstance(target, str):
        return None, target
    jvm = stored.sparkSession.sparkContext._jvm
    assert jvm is not None
    if not driver_loadable(jvm, target.driver):
        return None, (
            f"the JDBC driver {target.driver} is not on Spark's classpath (this session started "
            "without it; slipstream adds it to the sessions it builds)"
        )
    if flush is None:
        flush = Flush.from_conf(lambda name: stored.sparkSession.conf.get(name, None))
    password = target.password.reveal() if target.password is not None else None
    writer = jvm.slipstream.jvm.JdbcUpsertWriter(
        target.driver,
        target.url,
        target.properties,
        password,
        statement,
        list(columns),
        list(key),
        flush.every_ms,
        flush.max_keys,
        target.where,
        target.connect_fix,
    )
    return writer, None


def driver_loadable(jvm: Any, name: str) -> bool:
    """Whether the driver's class can be loaded where Spark loads its jars."""
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        jvm.java.lang.Class.forName(name, False, loader)
    except Exception:  # noqa: BLE001 - py4j's ClassNotFoundException
        return False
    return True


def foreach_jvm(writer: Any) -> Callable[[DataStreamWriter], DataStreamWriter]:
    """What puts a JVM ForeachWriter on a query's writer (pyspark's own `foreach` does the same
    with its Python-running one): the query then starts, with its trigger, as any other."""

    def attach(stream: DataStreamWriter) -> DataStreamWriter:
        stream._jwrite.foreach(writer)
        return stream

    return attach
