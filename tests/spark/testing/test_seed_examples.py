"""The seeds' small examples (examples/seeds.py) on the seeds' own inputs, with the seeds' own
outputs: seed 002's windows and user-log count, seed 003's stateless query, and the continuous
trigger running end to end over the rate source."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import pytest
from examples.seeds import OpenActions, UserLogCount, Windows
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from tests.helpers import REPO, slipstream

pytestmark = pytest.mark.spark

# seed 002: "time value" (we put the table on 2023-07-23, the date of its log example)
SEED_TABLE = [("10:00:05", 1), ("10:00:15", 2), ("10:00:45", 3),
              ("10:01:05", 4), ("10:01:25", 5), ("10:01:55", 6)]  # fmt: skip
DAY = "2023-07-23T"


@pytest.fixture(scope="module")
def windowed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    lines = [json.dumps({"time": f"{DAY}{t}Z", "value": v}) for t, v in SEED_TABLE]
    out = {}
    for label, settings in {
        "1m": {"window": "1m"},
        "2m/1m": {"window": "2m", "slide": "1m"},
        "1m/30s": {"window": "1m", "slide": "30s"},
    }.items():
        h = PipelineHarness(
            spark, Windows(), tmp_path_factory.mktemp("windows"), sink="sqlite",
            trigger="available-now", **settings,
        )  # fmt: skip
        h.feed(lines)
        with h:
            h.process()
            out[label] = {r["window_start"][11:19]: (r["total"], r["average"]) for r in h.results()}
    return out


def _expected(length: timedelta, step: timedelta) -> dict[str, tuple[float, float]]:
    """Windows [start, start + length) at every multiple of `step`, from plain Python."""
    moments = [(datetime.fromisoformat(f"{DAY}{t}+00:00"), v) for t, v in SEED_TABLE]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    out = {}
    for moment, _ in moments:
        last = epoch + (moment - epoch) // step * step
        start = last
        while start + length > moment:
            inside = [v for m, v in moments if start <= m < start + length]
            out[start.strftime("%H:%M:%S")] = (float(sum(inside)), sum(inside) / len(inside))
            start -= step
    return out


def test_one_minute_windows_hold_1_2_3_and_4_5_6_as_the_seed_says(windowed: dict) -> None:
    assert windowed["1m"] == {"10:00:00": (6.0, 2.0), "10:01:00": (15.0, 5.0)}


def test_sliding_variants_match_plain_python(windowed: dict) -> None:
    minute, half = timedelta(minutes=1), timedelta(seconds=30)
    assert windowed["2m/1m"] == _expected(2 * minute, minute)
    assert windowed["2m/1m"]["10:00:00"] == (21.0, 3.5)  # 10:00-10:02 holds all six
    assert windowed["1m/30s"] == _expected(minute, half)
    assert len(windowed["1m/30s"]) == 5


def test_user_log_count_over_two_files_gives_the_seeds_counts(
    spark: SparkSession, tmp_path: Path
) -> None:
    file1 = ['{"userId": "user1", "timestamp": "2023-07-23T00:00:00Z"}',
             '{"userId": "user2", "timestamp": "2023-07-23T00:01:00Z"}']  # fmt: skip
    file2 = ['{"userId": "user1", "timestamp": "2023-07-23T00:02:00Z"}',
             '{"userId": "user3", "timestamp": "2023-07-23T00:03:00Z"}']  # fmt: skip
    with PipelineHarness(spark, UserLogCount(), tmp_path, mode="complete") as h:
        h.feed(file1, "File1.json")
        first = {r["userId"]: r["count"] for r in h.process()}
        h.feed(file2, "File2.json")
        second = {r["userId"]: r["count"] for r in h.process()}
    assert first == {"user1": 1, "user2": 1}
    assert second == {"user1": 2, "user2": 1, "user3": 1}  # complete: the whole table again


def test_open_actions_keeps_opens_upper_cased_in_append_mode(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = Path(str(resources.files("slipstream") / "data" / "mobile"))
    files = [folder / f"file{i}.json" for i in range(1, 5)]
    with PipelineHarness(spark, OpenActions(), tmp_path, max_files_per_trigger=1) as h:
        batches = []
        for path in files:
            h.feed(path.read_text().splitlines(), path.name)
            batches.append(sorted((r["id"], r["action"], r["ts"]) for r in h.process()))
    expected = []
    for path in files:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        expected.append(
            sorted((r["id"], "OPEN", r["ts"] + "Z") for r in records if r["action"] == "open")
        )
    assert batches == expected
    # the seed's output over its files, row for row
    assert sorted(row for batch in batches for row in batch) == [
        ("phone1", "OPEN", "2018-03-02T10:02:33Z"),
        ("phone2", "OPEN", "2018-03-02T10:03:35Z"),
        ("phone3", "OPEN", "2018-03-02T10:03:50Z"),
        ("phone4", "OPEN", "2018-03-02T10:07:50Z"),
        ("phone5", "OPEN", "2018-03-02T10:10:50Z"),
    ]


def test_the_continuous_trigger_runs_a_map_only_pipeline_end_to_end(tmp_path: Path) -> None:
    """Spark's rate source -> console under --trigger continuous:1s, for a bounded time."""
    done = slipstream(
        "run", "examples.seeds:RateSquares", "--source", "rate", "--rows-per-second", "5",
        "--trigger", "continuous:1s", "--duration", "12s", "--state-dir", str(tmp_path / "st"),
        cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "trigger     continuous:1s" in done.stdout
    rows = re.findall(r"^\|\S.*\|\s*(\d+)\s*\|\s*(\d+)\s*\|$", done.stdout, re.M)
    assert len(rows) >= 5, done.stdout[-3000:]
    assert all(int(v) % 2 == 0 and int(s) == int(v) ** 2 for v, s in rows)
