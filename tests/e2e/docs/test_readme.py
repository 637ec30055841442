"""The README's quick start, and the code the README moved to the documentation pages (the
harness examples in docs/howto/testing.md, the workloads in docs/pipelines.md), run as a new
user would. The other pages' commands (the tour of the CLI among them):
tests/e2e/docs/test_docs_commands.py, tests/e2e/kafka/test_kafka.py."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.checkpoint.logs import recorded_partitions
from tests import doc_blocks
from tests.helpers import slipstream

TESTING = "docs/howto/testing.md"


def block_after(heading: str, lang: str, page: str = "README.md") -> str:
    return doc_blocks.block_after(page, heading, lang)


def test_quick_start_is_two_commands() -> None:
    assert block_after("## Quick start", "sh").split("\n")[:2] == [
        "make demo    # the flagship job on embedded defaults: local Spark, files, SQLite",
        "make test    # lint + the whole suite (starts the services it needs)",
    ]


@pytest.mark.spark
def test_python_example(spark: SparkSession, tmp_path: Path) -> None:
    code = doc_blocks.blocks(TESTING)[0][2]
    exec(compile(code, TESTING, "exec"), {"tmp_path": tmp_path})  # noqa: S102


@pytest.mark.spark
def test_time_control_example(spark: SparkSession, tmp_path: Path) -> None:
    blocks = [body for lang, _, body in doc_blocks.blocks(TESTING) if lang == "python"]
    assert len(blocks) == 2 and "ProcessorClock" in blocks[1]
    exec(compile(blocks[1], TESTING, "exec"), {"tmp_path": tmp_path})  # noqa: S102


@pytest.mark.spark
@pytest.mark.slow
def test_the_workload_commands_run(tmp_path: Path) -> None:
    block = block_after(
        "## Sensors, IoT steps, temperature/load, ads and activity", "text", "docs/pipelines.md"
    )
    # each workload's lines (generate, then run) in order; two workloads at a time, as in two
    # terminals: each pipeline has its own checkpoints and tables, the SQLite file is shared
    workloads: list[list[str]] = []
    for line in block.replace("\\\n", " ").strip().splitlines():
        if line.startswith("slipstream generate"):
            workloads.append([])
        workloads[-1].append(line)

    def run(lines: list[str]) -> None:
        for line in lines:
            args = shlex.split(line.partition("#")[0])
            done = slipstream(*args[1:], cwd=tmp_path)
            assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(run, lines) for lines in workloads]:
            future.result()
    with sqlite3.connect(tmp_path / "state" / "slipstream.db") as conn:
        alerted = {r[0] for r in conn.execute("SELECT sensor_id FROM sensor_alerts")}
        joined = conn.execute("SELECT count(*) FROM temperature_load").fetchone()[0]
        attributed = conn.execute("SELECT count(*) FROM ad_clicks_attributed").fetchone()[0]
        statuses = {r[0] for r in conn.execute("SELECT status FROM user_status")}
        crashes = conn.execute("SELECT count(*) FROM user_alerts WHERE alert = 'crash'").fetchone()
    report = json.loads((tmp_path / "sensors-in_generation-report.json").read_text())
    assert alerted == set(report["info"]["noisy"])
    assert joined > 0 and attributed > 0
    assert {"inactive", "active"} <= statuses and crashes[0] > 0
    assert list((tmp_path / "state" / "outputs" / "iot_steps" / "steps").glob("*.parquet"))
    # what the runs made is private to the user: 0700 folders, 0600 files (raw rejected
    # records included); the generated landing files stay readable (0644)
    state = [tmp_path / "state", *(tmp_path / "state").rglob("*")]
    assert {p.stat().st_mode & 0o777 for p in state if p.is_dir()} == {0o700}
    assert {p.stat().st_mode & 0o777 for p in state if p.is_file()} == {0o600}
    # rejected records were written (Spark's part-* files, or the ingest stage's batch-N.json)
    quarantine = (tmp_path / "state" / "quarantine").rglob("*.json")
    assert [p for p in quarantine if not p.name.startswith(".") and p.stat().st_size]
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "iot-in").glob("*.jsonl")} == {0o644}
    # every query's checkpoint was made with one shuffle partition per core: these are
    # available-now backfills on the default master, local[*] (runtime/partitions.py)
    made = {
        q.relative_to(tmp_path / "state" / "checkpoints"): recorded_partitions(q)
        for q in (tmp_path / "state" / "checkpoints").glob("*/*")
        if (q / "offsets").is_dir()
    }
    assert len(made) >= 5 and set(made.values()) == {os.cpu_count()}, made
