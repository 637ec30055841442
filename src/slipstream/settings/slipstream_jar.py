"""slipstream's jar (slipstream/jvm/slipstream-parse.jar) in the session: on Spark's classpath
(`spark.jars`, the driver's and the executors'), and on the driver's own where the JVM starts
here, for the local file system it carries.

A local master's `file:` paths set a file's permissions, resolve its links and read its status
(one `stat`, where Hadoop's takes five) in the JVM (java/src/slipstream/jvm/LocalFiles.java;
Hadoop's local file system otherwise). Hadoop without
its native library (none comes with PySpark from PyPI) starts a `chmod` process for every file
it creates and its FileContext a `readlink` for every rename: each checkpoint file (offset,
commit and source logs, state files, and a checksum file beside each) started two to four
processes; a batch's offset log took 41-43 ms, 2-3 ms with it (docs/benchmarks.md). It needs
the jar on the classpath the JVM starts with (`spark.driver.extraClassPath`: spark-submit reads
`spark.jars` through the file system), so it applies where the JVM starts here. Clusters, Spark
Connect and a driver started by spark-submit keep Hadoop's own; `--conf
spark.hadoop.fs.file.impl=...` chooses another."""

from __future__ import annotations

import os
from collections.abc import Mapping

from slipstream.jvm import required_jar

#: a local master's `file:` paths through the jar: no process started per file written
LOCAL_FILES = {
    "spark.hadoop.fs.file.impl": "slipstream.jvm.LocalFiles",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "slipstream.jvm.LocalFiles$Context",
}


def with_parser_jar(jars: str) -> str:
    """`spark.jars` with slipstream's JVM parser first (slipstream/jvm/slipstream-parse.jar,
    shipped in the package): Spark puts it on the driver's and the executors' classpath.
    ConfigError JVM_PARSER_MISSING when it was not built (`make jvm`)."""
    jar = str(required_jar())
    return ",".join([jar, *[j for j in jars.split(",") if j.strip() and j.strip() != jar]])


def driver_classpath(settings: Mapping[str, str]) -> dict[str, str]:
    """`spark.driver.extraClassPath` with slipstream's jar first: Hadoop loads LOCAL_FILES'
    classes before Spark adds `spark.jars` (spark-submit reads the jars through them)."""
    jar = str(required_jar())
    theirs = [p for p in settings.get("spark.driver.extraClassPath", "").split(os.pathsep) if p]
    return {"spark.driver.extraClassPath": os.pathsep.join([jar, *[p for p in theirs if p != jar]])}
