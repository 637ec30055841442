"""A class-data-sharing archive for the JVMs the tests start in subprocesses.

Every `slipstream run`, crash-chain restart and spark-submit a test starts is a new driver JVM
that loads and verifies Spark's classes before its first batch. A dynamic CDS archive (JDK 13+:
`-XX:ArchiveClassesAtExit` once, `-XX:SharedArchiveFile` after) maps them ready-made instead.
`slipstream run mobile` over the samples, available-now into SQLite, whole process tree: 15.8,
17.7 and 19.5 CPU seconds without, 11.7, 12.6 and 16.1 with (3 pairs alternated, 2 cores, load
10-22, 2026-11-29); a local session's start and one small job: 14.0 without, 6.8-8.5 with.

The first test process that finds no archive starts `python -m tests.class_archive` in the
background, which runs `slipstream run mobile` over the package's samples with
`-XX:ArchiveClassesAtExit` and renames the archive into place when it is whole; until then (and
wherever the JVM cannot use it: another JDK, another classpath) the JVMs start as before. The
archive's name carries what it depends on (the JDK, PySpark's jars, the JVM options), so a
change makes a new one. `-Xlog:cds=off` keeps the JVM from printing on the tests' terminals when
it cannot use an archive."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import SHORT_LIVED_JVM

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
REPO = Path(__file__).resolve().parents[1]


def _key() -> str:
    """What the archive depends on: the java binary, PySpark's jars (the classpath the JVM checks
    the archive against: their folder and names), slipstream's jar and the JVM options."""
    import pyspark

    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin"))
        if ("JAVA_HOME" in os.environ)
        else shutil.which("java")
    )
    jars = Path(pyspark.__file__).parent / "jars"
    parts = [str(Path(java).resolve()) if java else "", str(jars), SHORT_LIVED_JVM]
    parts += sorted(p.name for p in jars.glob("*.jar"))
    ours = REPO / "src" / "slipstream" / "jvm" / "slipstream-parse.jar"  # on the driver's classpath
    parts.append(hashlib.sha256(ours.read_bytes()).hexdigest() if ours.is_file() else "")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive() -> Path:
    return Path(tempfile.gettempdir()) / f"slipstream-tests-{_key()}.jsa"


def jvm_options() -> str:
    """SHORT_LIVED_JVM, with the archive once it is there."""
    path = archive()
    return (
        f"{SHORT_LIVED_JVM} -XX:SharedArchiveFile={path} {QUIET}"
        if path.exists()
        else (SHORT_LIVED_JVM)
    )


def start_making() -> None:
    """Start making the archive in the background unless it is there (the maker itself gives
    way when another process is already making it)."""
    if not archive().exists():
        subprocess.Popen(
            [sys.executable, "-m", "tests.class_archive"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def make() -> int:
    """Run one small `slipstream run` whose JVM writes the archive at exit; rename it into place
    when the run succeeded. One maker at a time (a lock beside the archive)."""
    path = archive()
    with open(path.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0
        if path.exists():
            return 0
        with tempfile.TemporaryDirectory(prefix="slipstream-cds-") as work:
            partial = Path(work) / "archive.jsa"
            env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPSTREAM_")}
            env["PYTHONPATH"] = str(REPO / "src")
            env["SPARK_SUBMIT_OPTS"] = f"{SHORT_LIVED_JVM} -XX:ArchiveClassesAtExit={partial}"
            # The JVM writes the archive as it exits, after the Python process: reading its
            # output to the end waits for the JVM too (it holds the same pipe).
            run = subprocess.run(
                [sys.executable, "-m", "slipstream", "run", "mobile", "--quiet",
                 "--input", str(REPO / "src" / "slipstream" / "data" / "mobile"),
                 "--trigger", "available-now", "--sink", f"sqlite:{work}/out.db",
                 "--state-dir", f"{work}/state"],
                env=env, cwd=work, capture_output=True, check=False,
            )  # fmt: skip
            if run.returncode != 0 or not partial.exists():
                return 1
            shutil.move(partial, path.with_suffix(".partial"))
            os.replace(path.with_suffix(".partial"), path)
    return 0


if __name__ == "__main__":
    sys.exit(make())
