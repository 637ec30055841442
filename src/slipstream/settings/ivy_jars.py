"""Packages handed to Spark as the local jars Ivy resolved them to.

Spark resolves `spark.jars.packages` with Ivy at every JVM start, even when every jar is already
in Ivy's cache: about 1.3-2.2 CPU seconds and 1-2 s of wall time before a session of a run that
reads Kafka, writes Delta or writes a database in real time (a local session's start and one
small job with Spark's Kafka connector as a package against the same jars in `spark.jars`, 3
pairs alternated, 2 cores, 2026-12-01).

So the first run that needs a set of packages has them resolved once more, by a `spark-submit`
(output captured) of a script that prints the jars Spark resolved them to, and keeps the list
beside Ivy's cache (`IVY/slipstream-jars-KEY`; KEY: the packages and every other `spark.jars.*`
setting but `spark.jars`, the repositories and exclusions among them). A run that finds the list
and every jar in it gives Spark those jars in `spark.jars` and no packages: the same jars on the
same classpath, in the driver and the executors, without Ivy. A listing that fails leaves the
packages as they were: Spark resolves them at the JVM's start and says why it cannot."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from slipstream.settings.kafka_connector import PACKAGES, ivy_lock, ivy_root, submit_packages

MEMO_PREFIX = "slipstream-jars-"
#: the line of the listing script's output that carries the jars, as JSON
MARK = "slipstream-resolved-jars "
#: spark-submit puts a Python application's resolved packages on its Python path
LISTING = (
    f"import json, sys\nprint({MARK!r} + json.dumps([p for p in sys.path if p.endswith('.jar')]))\n"
)


def memo_path(settings: Mapping[str, str]) -> Path:
    """Where the list of `settings`' packages' jars is kept."""
    asked = sorted((k, v) for k, v in settings.items() if k.startswith("spark.jars.") and v.strip())
    key = hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:16]
    return ivy_root(settings) / f"{MEMO_PREFIX}{key}"


def as_local_jars(settings: Mapping[str, str]) -> dict[str, str]:
    """`settings` with `spark.jars.packages` replaced by the jars they resolve to, appended to
    `spark.jars`; `settings` as they are when there are no packages or no list can be had."""
    packages = [p.strip() for p in settings.get(PACKAGES, "").split(",") if p.strip()]
    if not packages:
        return dict(settings)
    jars = known_jars(settings) or listed_jars(settings)
    if not jars:
        return dict(settings)
    pinned = {k: v for k, v in settings.items() if k != PACKAGES}
    given = [j.strip() for j in settings.get("spark.jars", "").split(",") if j.strip()]
    pinned["spark.jars"] = ",".join([*given, *(j for j in jars if j not in given)])
    return pinned


def known_jars(settings: Mapping[str, str]) -> list[str]:
    """The kept list when every jar in it is still there; [] otherwise."""
    memo = memo_path(settings)
    try:
        jars = [line for line in memo.read_text().splitlines() if line.strip()]
    except OSError:
        return []
    return jars if jars and all(Path(j).is_file() for j in jars) else []


def listed_jars(settings: Mapping[str, str]) -> list[str]:
    """Resolve the packages once in a captured spark-submit and keep the list of their jars
    (one listing at a time per Ivy folder); [] when the listing fails."""
    with ivy_lock(settings):
        if jars := known_jars(settings):  # another run listed them meanwhile
            return jars
        asked = [
            f"--conf={k}={v}"
            for k, v in settings.items()
            if k.startswith("spark.jars.") and k != PACKAGES and v.strip()
        ]
        try:
            done = submit_packages(settings[PACKAGES], asked, LISTING)
        except (OSError, subprocess.TimeoutExpired):
            return []
        jars = resolved(done.stdout, ivy_root(settings)) if done.returncode == 0 else []
        if jars:
            keep(memo_path(settings), jars)
        return jars


def resolved(output: str, ivy: Path) -> list[str]:
    """The jars in the listing's output that Ivy retrieved (under `IVY/jars`)."""
    for line in output.splitlines():
        if line.startswith(MARK):
            paths = json.loads(line[len(MARK) :])
            folder = (ivy / "jars").resolve()
            return [p for p in paths if Path(p).resolve().parent == folder and Path(p).is_file()]
    return []


def keep(memo: Path, jars: list[str]) -> None:
    """Write the list whole (a temporary file, then a rename); a folder that refuses it only
    means the next run lists them again."""
    with contextlib.suppress(OSError):
        partial = memo.with_name(memo.name + ".partial")
        partial.write_text("".join(f"{j}\n" for j in jars))
        os.replace(partial, memo)
