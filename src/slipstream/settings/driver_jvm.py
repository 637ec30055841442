"""The driver's JVM, started as PySpark would start it but with its standard error filtered:
the module system's notice and Ivy's package report are dropped, every other line passes
(settings/session.py starts it before the SparkSession, with the settings on its command
line)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
from collections.abc import Mapping
from typing import IO

#: what the JVM writes to standard error at every start, whatever the log configuration
JVM_NOTICES = (b"WARNING: Using incubator modules",)
#: the first line of Ivy's report at a JVM's start with `spark.jars.packages`, and its last
IVY_START = b":: loading settings :: "
IVY_DONE = re.compile(rb"^\s*\d+ artifacts copied, \d+ already retrieved")


def launch_jvm(settings: Mapping[str, str]) -> None:
    """Start the driver's JVM as PySpark would (spark-submit with `settings` on its command
    line), with its standard error through `forward_stderr`. Nothing when a JVM is already up
    (an earlier session of this process): the session then reuses it."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(
        target=forward_stderr,
        args=(gateway.proc.stderr, 2),
        name="slipstream-jvm-stderr",
        daemon=True,
    ).start()
    SparkContext._ensure_initialized(gateway=gateway)


def ivy_report(line: bytes, inside: bool) -> bool:
    """Whether `line` is one of Ivy's report (`inside`: the line before was): from its
    `:: loading settings ::` to its `N artifacts copied` line; a line of an error or an
    exception ends it (shown: Ivy failed after all)."""
    if line.startswith(IVY_START):
        return True
    if not inside or IVY_DONE.match(line):
        return False
    return not re.match(rb"^(Exception|Error|\w+(\.\w+)+(Exception|Error))", line)


def forward_stderr(source: IO[bytes], target: int) -> None:
    """Copy the JVM's standard error to the file descriptor `target` (this process's standard
    error, whatever `sys.stderr` has become meanwhile) line by line, but for `JVM_NOTICES`.
    It reads to the end whatever happens: a pipe nobody drains would block the JVM, and the
    Python workers it starts, at their next write to standard error. Ivy's report of the
    packages it resolves (`spark.jars.packages`: about 35 lines for the Kafka connector, 90
    for Delta) is dropped too: they were resolved before, output captured, and one line said
    which (kafka_connector.py, delta_package.py)."""
    ivy = False
    for line in iter(source.readline, b""):
        if line.startswith(JVM_NOTICES):
            continue
        ivy = ivy_report(line, ivy)
        if ivy or IVY_DONE.match(line):
            continue
        with contextlib.suppress(OSError):  # our stderr closed: the line has nowhere to go
            os.write(target, line)
