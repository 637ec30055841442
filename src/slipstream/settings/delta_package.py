"""Delta Lake's jar and settings, for a session that reads or writes a Delta table, found
before Spark starts the way Spark's Kafka connector is (settings/kafka_connector.py).

`io.delta:delta-spark_2.13` at the version of the installed `delta-spark` Python package
(`pip install 'slipstream[delta]'`) joins `spark.jars.packages` when the repository serves it,
else the newest earlier release of the same major version it serves (PyPI's delta-spark 4.4.1
came with no 4.4.1 jar on Maven Central: 4.4.0 is taken), said in one line. Spark's Ivy
resolves it first with its output captured: a jar that cannot be had is CONNECTOR_UNAVAILABLE
naming `--conf spark.jars=...`, never Ivy's report on the terminal. Delta's SQL extension and
catalog are set with it (MERGE, `delta.`PATH`` tables). A session without Delta gets nothing.

On a local master Delta rebuilds a table's snapshot (its log's state, read before every MERGE and
write) in as many partitions as the session has cores (`spark.databricks.delta.snapshotPartitions`;
Delta's 50 is sized for clusters). A MERGE of 40 rows into a small table took 6.2-6.6 s with 50
and 1.4-2.5 s with 1-2 on 2 cores (docs/benchmarks.md section 38).

Delta runs on the Spark 4.2 line only (core/spark_line.py): on another line, DELTA_UNAVAILABLE
before the JVM starts. What the user set wins: a delta-spark jar in `spark.jars` or a
coordinate of their own in `spark.jars.packages`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from slipstream.core import spark_line
from slipstream.errors import ConfigError
from slipstream.settings.kafka_connector import (
    PACKAGES,
    ivy_jar,
    ivy_root,
    pick,
    resolve_all,
    served_versions,
)

GROUP = "io.delta"
ARTIFACT = "delta-spark_2.13"
EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
#: the jar taken when the delta-spark Python package is not installed (the newest served for
#: Spark 4.2 in November 2026)
DEFAULT_VERSION = "4.4.0"

log = logging.getLogger("slipstream")


def python_version() -> str:
    """The installed delta-spark Python package's version (DEFAULT_VERSION without it)."""
    from importlib import metadata

    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        return DEFAULT_VERSION


def user_jar(conf: Mapping[str, str]) -> str | None:
    for key in ("spark.jars", PACKAGES):
        for item in conf.get(key, "").split(","):
            if "delta-spark" in item:
                return item.strip()
    return None


def coordinate(conf: Mapping[str, str]) -> str:
    """Delta's jar at delta-spark's version when cached or served, else the newest earlier one
    served (no repository answering: the newest earlier one in Spark's Ivy cache). The choice
    of an earlier run is kept beside the cache, so a run whose jar is cached asks no
    repository; a fallback is said in one line."""
    wanted = python_version()
    if ivy_jar(f"{GROUP}:{ARTIFACT}:{wanted}", conf).is_file():
        return f"{GROUP}:{ARTIFACT}:{wanted}"
    memo = ivy_root(conf) / f"slipstream-delta-for-{wanted}"
    known = memo.read_text().strip() if memo.is_file() else ""
    if known and ivy_jar(f"{GROUP}:{ARTIFACT}:{known}", conf).is_file():
        served: list[str] | None = [known]
    else:
        served = served_versions(conf, GROUP, ARTIFACT)
    version = pick(wanted, served if served is not None else cached(conf)) or wanted
    if version != wanted:
        with contextlib.suppress(OSError):
            memo.parent.mkdir(parents=True, exist_ok=True)
            memo.write_text(version + "\n")
        where = "the repository serves" if served is not None else "Spark's Ivy cache holds"
        log.warning(
            "Delta Lake: %s:%s:%s, for delta-spark %s (%s no %s)",
            GROUP, ARTIFACT, version, wanted, where, wanted,
        )  # fmt: skip
    return f"{GROUP}:{ARTIFACT}:{version}"


def cached(conf: Mapping[str, str]) -> list[str]:
    """Delta's jar versions already in Spark's Ivy cache."""
    prefix = f"{GROUP}_{ARTIFACT}-"
    jars = ivy_jar(f"{GROUP}:{ARTIFACT}:0", conf).parent
    return [p.name[len(prefix) : -len(".jar")] for p in jars.glob(f"{prefix}*.jar")]


def unavailable(coordinates: str, reason: str) -> ConfigError:
    version = coordinates.split(":")[2] if coordinates.count(":") >= 2 else "VERSION"
    return ConfigError(
        "CONNECTOR_UNAVAILABLE",
        f"Delta Lake's jar {coordinates} could not be resolved from Maven Central: {reason}",
        f"give Spark a local copy: --conf spark.jars=/path/{ARTIFACT}-{version}.jar,"
        "/path/delta-storage-VERSION.jar; or a coordinate your repository serves: "
        f"--conf {PACKAGES}={GROUP}:{ARTIFACT}:VERSION",
    )


def delta_conf(conf: Mapping[str, str], local_cores: int | None = None) -> dict[str, str]:
    """The settings that give a new session Delta Lake (to merge over `conf`): its jar
    (resolved first, unless the user's settings carry one), SQL extension and catalog; on a
    local master of `local_cores` cores, snapshots rebuilt in that many partitions."""
    spark_line.require_delta()
    found: dict[str, str] = {}
    if local_cores is not None and SNAPSHOT_PARTITIONS not in conf:
        found[SNAPSHOT_PARTITIONS] = str(max(1, local_cores))
    extensions = [e for e in conf.get("spark.sql.extensions", "").split(",") if e.strip()]
    if EXTENSION not in extensions:
        found["spark.sql.extensions"] = ",".join([*extensions, EXTENSION])
    found.setdefault("spark.sql.catalog.spark_catalog", conf.get(
        "spark.sql.catalog.spark_catalog", CATALOG))  # fmt: skip
    chosen = user_jar(conf)
    if chosen is not None and chosen.count(":") != 2:
        return found  # a local jar (spark.jars): Spark takes it as it is
    wanted = chosen or coordinate(conf)
    resolve_all([wanted], conf, unavailable)
    if chosen is None:
        packages = [p for p in conf.get(PACKAGES, "").split(",") if p.strip()]
        found[PACKAGES] = ",".join([*packages, wanted])
    return found
