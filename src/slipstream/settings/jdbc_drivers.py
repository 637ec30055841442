"""The JDBC drivers of slipstream's JVM writer (sinks/jvm_rows.py), found before Spark starts.

In real-time mode an output into SQLite or PostgreSQL is written by a JVM ForeachWriter over
JDBC. Its driver joins `spark.jars.packages` only for a session that runs such an output, the
way Spark's Kafka connector does (settings/kafka_connector.py): resolved first by Spark's Ivy
from Maven Central into `~/.ivy2.5.2`, output captured, so a driver that cannot be had is
CONNECTOR_UNAVAILABLE naming the `--conf spark.jars=...` that gives Spark a local jar instead,
not an Ivy report and a JVM stack trace.

What the user set wins: a driver jar in `spark.jars` or a coordinate of their own (another
version, from their mirror) in `spark.jars.packages`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slipstream.errors import ConfigError
from slipstream.settings.kafka_connector import PACKAGES, resolve_all


@dataclass(frozen=True)
class JdbcDriver:
    """One JDBC driver, declared by the sink whose real-time writer loads it (`Sink.jdbc`):
    its Maven coordinate, its class (loaded in the writer's task), and how its jar or a
    coordinate of it is recognised among the user's own (`artifact` in the name, or a jar
    named `jar_prefix`...)."""

    coordinate: str
    driver_class: str
    artifact: str
    jar_prefix: str | None = None


def user_driver(driver: JdbcDriver, conf: Mapping[str, str]) -> str | None:
    """The driver the user chose with --conf (a jar or a coordinate), if any."""
    for key in ("spark.jars", PACKAGES):
        for item in conf.get(key, "").split(","):
            name = item.strip().rsplit("/", 1)[-1]
            prefix = driver.jar_prefix
            if driver.artifact in name or (prefix is not None and name.startswith(prefix)):
                return item.strip()
    return None


def unavailable(coordinates: str, reason: str) -> ConfigError:
    jars = ", ".join(
        f"/path/{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in coordinates.split(",")
    )
    return ConfigError(
        "CONNECTOR_UNAVAILABLE",
        f"the JDBC driver {coordinates} of the real-time database writer could not be resolved "
        f"from Maven Central: {reason}",
        f"give Spark a local copy: --conf spark.jars={jars.replace(', ', ',')}; or a coordinate "
        f"your repository serves: --conf {PACKAGES}=GROUP:ARTIFACT:VERSION",
    )


def driver_conf(drivers: Iterable[JdbcDriver], conf: Mapping[str, str]) -> dict[str, str]:
    """The settings that put `drivers` on a new session's classpath (to merge over `conf`);
    {} when none is needed or the user's settings already carry them. Resolves them first:
    raises CONNECTOR_UNAVAILABLE when one cannot be had."""
    wanted = sorted(set(drivers), key=lambda d: d.coordinate)
    mine = [d.coordinate for d in wanted if user_driver(d, conf) is None]
    theirs = [c for d in wanted if (c := user_driver(d, conf)) and c.count(":") == 2]
    if not mine and not theirs:
        return {}
    resolve_all([*theirs, *mine], conf, unavailable)
    if not mine:
        return {}
    packages = [p for p in conf.get(PACKAGES, "").split(",") if p.strip()]
    return {PACKAGES: ",".join([*packages, *mine])}
