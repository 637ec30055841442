"""The JVM writer's settings, without Spark: which JDBC drivers a session gets, and where the
writer connects (the password apart from everything printable). tests/e2e/kafka/test_realtime.py
runs the writer itself against SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.settings.jdbc_drivers import driver_conf, unavailable
from slipstream.sinks.jvm_rows import FLUSH_MS_CONF, Flush, JdbcTarget, jdbc_target
from slipstream.sinks.postgres import PostgresSink
from slipstream.sinks.rows import upsert_statement
from slipstream.sinks.sqlite import SqliteSink


def _ivy_with(tmp_path: Path, *coordinates: str) -> str:
    """A Spark Ivy folder that already holds the jars of `coordinates`."""
    ivy = tmp_path / "ivy"
    (ivy / "jars").mkdir(parents=True, exist_ok=True)
    for c in coordinates:
        group, artifact, version = c.split(":")
        (ivy / "jars" / f"{group}_{artifact}-{version}.jar").touch()
    return str(ivy)


def test_drivers_join_the_packages_only_when_asked_and_the_users_own_win(tmp_path: Path) -> None:
    pg, lite = PostgresSink.jdbc, SqliteSink.jdbc
    assert pg is not None and lite is not None
    ivy = _ivy_with(tmp_path, pg.coordinate, lite.coordinate)
    conf = {"spark.jars.ivy": ivy, "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"}
    assert driver_conf([], conf) == {}
    assert driver_conf([pg, lite], conf) == {
        "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0,"
        "org.postgresql:postgresql:42.7.14,org.xerial:sqlite-jdbc:3.54.1.0"
    }
    theirs = {"spark.jars": "/opt/jdbc/postgresql-42.2.0.jar", "spark.jars.ivy": ivy}
    assert driver_conf([pg], theirs) == {}
    assert driver_conf([lite, pg], theirs) == {
        "spark.jars.packages": "org.xerial:sqlite-jdbc:3.54.1.0"
    }


def test_a_driver_that_cannot_be_resolved_names_the_local_jar_setting() -> None:
    err = unavailable("org.postgresql:postgresql:42.7.14", "not found")
    assert err.code == "CONNECTOR_UNAVAILABLE"
    assert "--conf spark.jars=/path/postgresql-42.7.14.jar" in err.fix


def test_the_postgresql_target_keeps_the_password_out_of_what_is_printed() -> None:
    url = "postgresql://app:s3cret-Pw!x7@db.example:6543/shop?sslmode=require"
    sink = PostgresSink(SinkSpec.parse(url), environ={})
    target = jdbc_target(sink)
    assert isinstance(target, JdbcTarget)
    assert target.url == "jdbc:postgresql://db.example:6543/shop"
    assert target.properties == {
        "user": "app",
        "stringtype": "unspecified",  # ISO text into TIMESTAMPTZ, as psycopg binds it
        "ApplicationName": "slipstream",
        "connectTimeout": "10",
        "sslmode": "require",
    }
    assert target.password is not None and target.password.reveal() == "s3cret-Pw!x7"
    printed = f"{target.url} {target.properties} {target.where} {target!r}"
    assert "s3cret" not in printed
    socket = PostgresSink(SinkSpec.parse("postgresql"), environ={"PGHOST": "/run/postgresql"})
    assert "Unix socket" in str(jdbc_target(socket))


def test_the_sqlite_target_is_the_file_with_the_python_writers_settings(tmp_path: Path) -> None:
    sink = SqliteSink(SinkSpec.parse(f"sqlite:{tmp_path / 'out.db'}"), tmp_path / "default.db")
    target = jdbc_target(sink)
    assert isinstance(target, JdbcTarget)
    assert target.url == f"jdbc:sqlite:{tmp_path / 'out.db'}"
    assert target.driver == "org.sqlite.JDBC"
    assert target.properties["journal_mode"] == "WAL"
    # the statement the JVM writer prepares: JDBC's `?` marks for either database
    assert upsert_statement("t", ["k", "n"], ["k"], "?") == (
        'INSERT INTO "t" ("k", "n") VALUES (?, ?) ON CONFLICT ("k") DO UPDATE SET '
        '"n" = excluded."n"'
    )


def test_a_bad_flush_setting_is_refused_with_its_name() -> None:
    """The flush settings (`--conf slipstream.realtime.flushMs=...`): unset is the default,
    anything but a positive whole number is refused before the query starts, naming it."""
    assert Flush.from_conf(lambda _name: None) == Flush(20, 1000)
    assert Flush.from_conf({FLUSH_MS_CONF: " 5 "}.get) == Flush(5, 1000)
    for bad in ("0", "-3", "fast", "1e3"):
        with pytest.raises(ConfigError) as refused:
            Flush.from_conf({FLUSH_MS_CONF: bad}.get)
        assert refused.value.code == "CONFIG_BAD_VALUE" and FLUSH_MS_CONF in refused.value.message
