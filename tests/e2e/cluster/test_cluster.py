"""Slipstream on a real Spark standalone cluster (issue 15): a master and a worker on 127.0.0.1
from the installed pyspark (the `spark_cluster` fixture, slipstream/tools/standalone.py), drivers on
this host, four driver starts in all:

- `mobile`, launched as docs/scaling.md says: `spark-submit --deploy-mode client` with the
  wheel built from this checkout (and a Python that can import slipstream from nothing else),
  into PostgreSQL with the COPY running on the executors (`parallel_rows=0`): live, its driver
  SIGKILLed inside a batch's PostgreSQL transaction (after the executors staged the batch),
  then the same command finishes the stream with available-now;
- `trending`, live (default trigger) into SQLite (`views`) and Parquet (`archive`) while files
  land: the worker is SIGKILLed mid-batch (with its executor) and a new one started, then the
  driver is SIGKILLed mid-batch, and the same command finishes the stream with available-now.

Every output equals the same pipeline run on local[2] in this process and the independent
computations of test_crash.py (pandas and tests/trending_reference.py); the executors' own logs
show that the tasks ran there."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from slipstream.core.files import write_atomically
from slipstream.jvm import jar_path
from slipstream.testing import PipelineHarness, fault
from slipstream.tools.standalone import spark_home
from tests.e2e.crash.test_crash import (
    CASES,
    SEED,
    read_committed_files,
    read_pg,
    read_sqlite,
    trending_pool,
)

MOBILE, TRENDING = CASES["mobile"], CASES["trending"]

REPO = Path(__file__).resolve().parents[3]
SRC = str(REPO / "src")
TIMEOUT_S = 900  # a loaded 2-core machine; alone, each run takes well under a minute
# Short-lived JVMs: the C1 compiler alone starts them faster on 2 busy cores.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.cluster]


def spark_flags(cluster: Any, python: str | None = None) -> list[str]:
    conf = {
        **cluster.client_conf(),
        **({"spark.pyspark.python": python} if python else {}),
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
    }
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


def env_without_checkout() -> dict[str, str]:
    """The environment without this checkout's src/ on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLIPSTREAM_")}
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != SRC]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def build_wheel(out: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300, env=env_without_checkout(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("slipstream-*.whl")
    return wheel


def wheel_only_python(directory: Path) -> Path:
    """This environment's Python without its site hook: third-party packages come from its
    site-packages on PYTHONPATH, but the editable install of slipstream (a .pth file) is not
    loaded, so `import slipstream` can only find the wheel spark-submit puts on the path."""
    site = os.pathsep.join(p for p in sys.path if p.endswith("site-packages"))
    script = directory / "python-wheel-only"
    script.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" '
        f'exec {sys.executable} -S "$@"\n'
    )
    script.chmod(0o755)
    return script


def apps(cluster: Any) -> set[str]:
    return {p.name for p in cluster.work_dir.glob("app-*")}


def executor_stderr(cluster: Any, app: str) -> dict[str, str]:
    """Executor id -> that executor's stderr, for one application."""
    return {
        p.parent.name: p.read_text(errors="replace")
        for p in cluster.work_dir.glob(f"{app}/*/stderr")
    }


def batches(checkpoint: Path, log: str) -> list[int]:
    folder = checkpoint / log
    return (
        sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
    )


def last(checkpoint: Path, log: str) -> int:
    ids = batches(checkpoint, log)
    return ids[-1] if ids else -1


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen, what: str, log: Path) -> None:
    """Bounded poll of the checkpoint while the run lives: synchronisation on state."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert proc.poll() is None, f"the run exited ({proc.returncode}) before {what}; {log}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}; see {log}"
        time.sleep(0.05)


def local_results(spark: Any, pipeline: str, files: list[Path], workdir: Path, **kw: Any) -> list:
    """The same pipeline over the same files on local[2] (this process's session)."""
    with PipelineHarness(spark, pipeline, workdir, sink="sqlite", **kw) as h:
        for path in files:
            shutil.copy2(path, h.input / f".{path.name}")  # keeps the modification-time order
            os.replace(h.input / f".{path.name}", h.input / path.name)
        h.process()
        return h.results()


def test_mobile_submitted_with_the_wheel_survives_a_killed_driver_in_postgres(
    spark: Any, spark_cluster: Any, postgres: Any, pg_database: str, tmp_path: Path
) -> None:
    rng = random.Random(f"{SEED}-cluster")
    landing, state = tmp_path / "input", tmp_path / "state"
    landing.mkdir()
    files = [MOBILE.make_file(rng, i) for i in range(8)]
    paths = [tmp_path / f"events-{i:04d}.json" for i in range(8)]
    for path, lines in zip(paths, files, strict=True):
        path.write_text("\n".join(lines) + "\n")
    wheel = build_wheel(tmp_path / "dist")
    python = wheel_only_python(tmp_path)
    before = apps(spark_cluster)
    command = [
        str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.url,
        "--deploy-mode", "client", "--py-files", str(wheel), "--jars", str(jar_path()),
        *spark_flags(spark_cluster, str(python)),
        str(REPO / "scripts" / "slipstream_submit.py"),
        "run", "mobile", "--input", str(landing), "--state-dir", str(state),
        "--sink", f"{postgres.url(pg_database)}?parallel_rows=0", "--table", "mobile",
    ]  # fmt: skip

    def land(part: list[Path]) -> None:
        for path in part:
            write_atomically(landing, path.name, path.read_text().splitlines())

    # live (default trigger, one file a batch): the driver's Python SIGKILLs itself inside the
    # PostgreSQL transaction of batch 1, after the executors staged its rows
    land(paths[:4])
    killed = subprocess.run(
        [*command, "--max-files-per-trigger", "1"], capture_output=True, text=True,
        timeout=TIMEOUT_S, env={**env_without_checkout(), **fault("before-commit", 1)},
    )  # fmt: skip
    assert killed.returncode != 0, (killed.stdout + killed.stderr)[-4000:]
    assert read_pg(postgres, pg_database, "_slipstream_stage_mobile")["_batch_id"].eq(1).any()
    ledger = postgres.query(pg_database, "SELECT batch_id FROM _slipstream_batches")
    assert sorted(b for (b,) in ledger) == [0], "batch 1 was committed before the kill"
    # the same command finishes the stream with available-now (batch 1 again, then every
    # file in one batch), four more files landed
    land(paths[4:])
    done = subprocess.run(
        [*command, "--trigger", "available-now"],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env_without_checkout(),
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "summary mobile.counts:" in done.stdout, done.stdout

    got = MOBILE.normalise(read_pg(postgres, pg_database, "mobile"))
    local = MOBILE.normalise(
        pd.DataFrame(local_results(spark, "mobile", paths, tmp_path / "local"))
    )
    pd.testing.assert_frame_equal(got, local, obj="cluster vs local[2]")
    pd.testing.assert_frame_equal(got, MOBILE.expected_table(paths), obj="cluster vs pandas")
    ledger = postgres.query(pg_database, "SELECT batch_id FROM _slipstream_batches")
    assert sorted(b for (b,) in ledger) == list(range(len(ledger))), "a batch lost or doubled"
    assert read_pg(postgres, pg_database, "_slipstream_stage_mobile").empty

    first, second = sorted(apps(spark_cluster) - before)  # both ran on spark-submit's master
    for app in (first, second):
        logs = "\n".join(executor_stderr(spark_cluster, app).values())
        assert "Running task" in logs and "Finished task" in logs
        # A Python worker ran in the executor: the staging COPY (parsing and counting are
        # built-ins), its function imported from the wheel
        assert "Times: total" in logs
        assert "s3cret" not in logs
    assert "s3cret" not in killed.stdout + killed.stderr + done.stdout + done.stderr


def test_trending_live_survives_a_lost_worker_and_a_killed_driver(
    spark: Any, spark_cluster: Any, tmp_path: Path
) -> None:
    catalog, pool = trending_pool()
    files = pool[:12]
    landing, state = tmp_path / "input", tmp_path / "state"
    db, archive = state / "trending.db", tmp_path / "archive"
    checkpoint = state / "checkpoints" / "trending" / "views"
    command = [
        sys.executable, "-m", "slipstream", "run", "trending", "--master", spark_cluster.url,
        *spark_flags(spark_cluster), "--input", str(landing), "--input", f"catalog={catalog}",
        "--state-dir", str(state), "--max-files-per-trigger", "1",
        "--sink", f"views=sqlite:{db}", "--sink", f"archive=parquet:{archive}",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": SRC}
    landing.mkdir()

    def land(part: list[Path]) -> None:
        for path in part:
            write_atomically(landing, path.name, path.read_text().splitlines())

    land(files[:4])
    before = apps(spark_cluster)
    log = tmp_path / "live.log"
    with open(log, "w") as out:
        live = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        wait_until(lambda: last(checkpoint, "commits") >= 1, live, "two batches", log)
        land(files[4:8])
        wait_until(lambda: last(checkpoint, "offsets") > last(checkpoint, "commits"), live,
                   "a batch in progress", log)  # fmt: skip
        lost = last(checkpoint, "offsets")
        spark_cluster.kill_worker()  # the worker and its executor, mid-batch
        assert lost not in batches(checkpoint, "commits"), "the batch ended before the kill"
        spark_cluster.start_worker()
        wait_until(lambda: last(checkpoint, "commits") >= lost, live, "the lost batch", log)
        wait_until(lambda: last(checkpoint, "offsets") > last(checkpoint, "commits"), live,
                   "another batch in progress", log)  # fmt: skip
    finally:
        os.killpg(live.pid, signal.SIGKILL)  # the driver: Python and its JVM
        live.wait()
    killed = last(checkpoint, "offsets")
    where = "inside" if killed > last(checkpoint, "commits") else "after"
    land(files[8:])
    done = subprocess.run(
        [*command, "--trigger", "available-now"],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]

    views = TRENDING.normalise(read_sqlite(db, "article_views"))
    local = local_results(spark, "trending", files, tmp_path / "local", catalog=catalog)
    pd.testing.assert_frame_equal(views, TRENDING.normalise(pd.DataFrame(local)), obj="vs local")
    pd.testing.assert_frame_equal(views, TRENDING.expected_table(files), obj="views vs reference")
    finals = TRENDING.normalise(read_committed_files(spark, archive, "parquet"))
    assert not finals.duplicated(["window_start", "article_id"]).any(), "a window archived twice"
    pd.testing.assert_frame_equal(finals, TRENDING.expected_final(files), obj="archive")

    first, second = sorted(apps(spark_cluster) - before)  # the live run, then the finishing one
    executors = executor_stderr(spark_cluster, first)
    assert len(executors) >= 2, "the lost executor was not replaced"  # one per worker
    for text in executors.values():
        assert "Running task" in text, "an executor of the live run ran no task"
    assert "Finished task" in "".join(executor_stderr(spark_cluster, second).values())
    print(
        f"cluster trending: worker lost in batch {lost}, driver killed {where} batch {killed}; "
        f"{len(views)} rows, {views['views'].sum()} views == reference; archive {len(finals)} rows"
    )
