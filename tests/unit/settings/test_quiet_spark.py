"""Without --verbose, no line of Spark's or the JVM's reaches the terminal (issue 30, item 5):
no log4j profile line, no NativeCodeLoader, no incubator-module warning, no deprecation of our
own parser's TRIM, no truncated plan."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

from slipstream.settings.driver_jvm import forward_stderr
from slipstream.settings.session import LOG4J2, java_log_options
from slipstream.tools.demo import copy_samples
from tests.helpers import slipstream

#: a line of Spark's log (its pattern or ours), or of the JVM's start
SPARK_LINE = re.compile(
    r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d |WARNING: Using incubator modules|log4j|"
    r"Setting default log level|To adjust logging level|NativeCodeLoader",
    re.MULTILINE,
)


def test_the_jvm_reads_the_packaged_log_configuration_at_the_commands_level() -> None:
    assert LOG4J2.is_file()
    options = java_log_options("ERROR", {})["spark.driver.extraJavaOptions"]
    assert f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}" in options
    assert "-Dslipstream.log.level=ERROR" in options
    # the user's own options come last: a -D given twice, the last wins
    mine = java_log_options("WARN", {"spark.driver.extraJavaOptions": "-Dx=1"})
    assert mine["spark.driver.extraJavaOptions"].endswith("-Dx=1")


def test_the_jvms_incubator_notice_is_dropped_and_every_other_line_passes() -> None:
    source = io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Exception in thread main java.lang.OutOfMemoryError\n"
    )
    read, write = os.pipe()
    forward_stderr(source, write)
    os.close(write)
    with os.fdopen(read, "rb") as shown:
        assert shown.read() == b"Exception in thread main java.lang.OutOfMemoryError\n"


def test_ivys_report_is_dropped_from_its_first_line_to_its_last() -> None:
    """What a JVM started with Delta's package printed (abridged): Ivy's report goes, the
    lines before and after it and an exception inside it stay."""
    source = io.BytesIO(
        b"before\n"
        b":: loading settings :: url = jar:file:/x/ivy-2.5.3.jar!/ivysettings.xml\n"
        b"Ivy Default Cache set to: /root/.ivy2.5.2/cache\n"
        b"io.delta#delta-spark_2.13 added as a dependency\n"
        b"\tfound io.delta#delta-storage;4.4.0 in central\n"
        b"\t|      default     |   37  |   0   |   0   |   4   ||   33  |   0   |\n"
        b":: retrieving :: org.apache.spark#spark-submit-parent-0a49c1c3;1.0\n"
        b"\t0 artifacts copied, 33 already retrieved (0kB/246ms)\n"
        b"after\n"
        b":: loading settings :: url = jar:file:/x/ivy-2.5.3.jar!/ivysettings.xml\n"
        b"Exception in thread main java.lang.RuntimeException: unresolved\n"
    )
    read, write = os.pipe()
    forward_stderr(source, write)
    os.close(write)
    with os.fdopen(read, "rb") as shown:
        assert shown.read() == (
            b"before\nafter\nException in thread main java.lang.RuntimeException: unresolved\n"
        )


def test_the_jvms_stderr_is_drained_even_when_ours_is_closed() -> None:
    read, write = os.pipe()
    os.close(read)  # writing now fails (EPIPE): every line must still be read
    source = io.BytesIO(b"a\n" * 1000)
    forward_stderr(source, write)
    os.close(write)
    assert source.read() == b""  # read to the end


@pytest.mark.spark
@pytest.mark.slow
def test_a_default_run_shows_no_spark_log_line(tmp_path: Path) -> None:
    copy_samples(tmp_path / "landing", "mobile")
    args = ("run", "mobile", "--input", "landing", "--trigger", "available-now")
    result = slipstream(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    terminal = result.stdout + result.stderr
    assert "summary mobile.counts: 2 batches" in terminal
    assert not SPARK_LINE.search(terminal), terminal
    assert result.stderr.strip() == "", result.stderr
    # --verbose shows Spark's warnings, but none of these ever: they were ours to fix
    result = slipstream(*args, "--verbose", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for never in ("TRIM", "Truncated the string representation", "incubator", "NativeCodeLoader"):
        assert never not in result.stderr, result.stderr


def test_a_failed_querys_own_log_lines_are_off_without_verbose() -> None:
    """A full disk's run showed `ERROR TaskSetManager`, `FileFormatWriter: Aborting job` and
    `MicroBatchExecution: Query ... terminated with error` though the run said DISK_FULL itself
    (issue 45 item 2), and into a Kafka sink `DataWritingSparkTask: Aborting commit` and
    `WriteToDataSourceV2Exec: ... is aborting` (the fault campaign's seed 66, issue 43), into
    a Delta sink `MergeIntoCommand: Fatal error in MERGE` (seed 328), and from the noop write
    that runs a batch the ledger skips `OverwriteByExpressionExec: ... is aborting` (seed 230):
    the loggers of these classes (log4j takes a class's nearest configured ancestor) follow
    -Dslipstream.log.failures, OFF unless --verbose."""
    assert (
        "-Dslipstream.log.failures=OFF"
        in java_log_options("ERROR", {})["spark.driver.extraJavaOptions"]
    )
    assert (
        "-Dslipstream.log.failures=WARN"
        in java_log_options("WARN", {})["spark.driver.extraJavaOptions"]
    )
    levels = configured_levels(LOG4J2.read_text())
    for logged in (
        "org.apache.spark.scheduler.TaskSetManager",
        "org.apache.spark.sql.execution.datasources.FileFormatWriter",
        "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
        "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
        "org.apache.spark.sql.execution.datasources.v2.OverwriteByExpressionExec",
        "org.apache.spark.sql.delta.commands.MergeIntoCommand",
        "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
        "org.apache.spark.SparkContext",
    ):
        parts = logged.split(".")
        nearest = next(
            ".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in levels
        )
        assert levels[nearest] == "${sys:slipstream.log.failures:-ERROR}", (logged, nearest)


def configured_levels(text: str) -> dict[str, str]:
    """log4j2.properties' loggers: each logger's name and its level."""
    names, levels = {}, {}
    for line in text.splitlines():
        key, _, value = line.partition(" = ")
        if key.startswith("logger.") and key.endswith(".name"):
            names[key.removesuffix(".name")] = value
        elif key.startswith("logger.") and key.endswith(".level"):
            levels[key.removesuffix(".level")] = value
    return {name: levels[key] for key, name in names.items()}
