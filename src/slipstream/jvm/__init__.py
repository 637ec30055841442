"""slipstream's JVM component: `slipstream-parse.jar`, built from `java/` by `make jvm` (javac
against the jars of the installed pyspark) and shipped inside the package (and the wheel).

The session builder puts it on Spark's classpath (`spark.jars`) without the user naming it;
`slipstream.ingest.jvm_parse` registers the strict JSON parser it holds."""

from __future__ import annotations

from pathlib import Path

from slipstream.errors import ConfigError

JAR_NAME = "slipstream-parse.jar"
#: the Java class that registers the parser (java/src/slipstream/jvm/StrictJson.java)
ENTRY_CLASS = "slipstream.jvm.StrictJson"


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
    """The jar, or ConfigError JVM_PARSER_MISSING saying how to build it."""
    path = jar_path()
    if not path.is_file():
        raise missing_jar_error()
    return path
