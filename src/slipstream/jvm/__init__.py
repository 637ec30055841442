"""slipstream's JVM component: `slipstream-parse.jar`, built from `java/` by `make jvm` (javac
against the jars of the installed pyspark) and shipped inside the package (and the wheel).

The session builder puts it on Spark's classpath (`spark.jars`) without the user naming it;
`slipstream.ingest.jvm_parse` registers the strict JSON parser it holds,
`slipstream.ingest.quarantine` the function that writes rejected records from the query that
reads them, real-time mode's database outputs use its JDBC writer, and a local master's `file:`
paths its local file system (settings/slipstream_jar.py)."""

from __future__ import annotations

import hashlib
import os
from importlib import resources
from pathlib import Path

from slipstream.errors import ConfigError

JAR_NAME = "slipstream-parse.jar"
#: the Java class that registers the parser (java/src/slipstream/jvm/StrictJson.java)
ENTRY_CLASS = "slipstream.jvm.StrictJson"
#: the deduplication by timers (java/src/slipstream/jvm/TimerDedup.java, slipstream/jvm/dedup.py);
#: a plan names it in its transformWithState node (`slipstream.jvm.TimerDedup@...`)
TIMER_DEDUP_CLASS = "slipstream.jvm.TimerDedup"
#: observe(): `DEDUP_TIMERS_METRIC.in.N` and `.out.N`, each with the field `rows`, around its
#: processor N of a query (slipstream/jvm/dedup.py; monitor/listener.py counts duplicates)
DEDUP_TIMERS_METRIC = "dedup_timers"


def jar_path() -> Path:
    """Where the jar is, built or not."""
    return Path(__file__).resolve().parent / JAR_NAME


def missing_jar_error() -> Exception:
    return ConfigError(
        "JVM_PARSER_MISSING",
        f"slipstream's JVM parser is not built: {jar_path()} is missing",
        "run `make jvm` in the slipstream checkout (needs a JDK 17+: javac), or install "
        "slipstream from a wheel built by `make wheel`",
    )


def required_jar() -> Path:
    """The jar as a file, or ConfigError JVM_PARSER_MISSING saying how to build it. Imported
    from a zip (`spark-submit --py-files slipstream-*.whl`), the package's jar is copied out
    once into ~/.cache/slipstream/jvm (Spark needs a file to put on its classpath)."""
    path = jar_path()
    if path.is_file():
        return path
    if path.parent.is_dir():  # an installed or checked-out package: the jar was not built
        raise missing_jar_error()
    packed = resources.files(__package__) / JAR_NAME
    if not packed.is_file():
        raise missing_jar_error()
    data = packed.read_bytes()
    cache = Path.home() / ".cache" / "slipstream" / "jvm"
    out = cache / f"slipstream-parse-{hashlib.sha256(data).hexdigest()[:16]}.jar"
    if not out.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.{os.getpid()}")
        partial.write_bytes(data)
        os.replace(partial, out)
    return out
