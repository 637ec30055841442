"""The seeds' worked examples, with their exact inputs and outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from tests.helpers import MOBILE_SAMPLES, mobile_counts

pytestmark = pytest.mark.spark


def pairs(rows: list[dict]) -> list[tuple[int, int]]:
    return sorted((int(r["word"]), r["count"]) for r in rows)


def test_seed_002_running_counts_complete_mode(spark: SparkSession, tmp_path: Path) -> None:
    with PipelineHarness(spark, "wordcount", tmp_path, mode="complete") as h:
        h.feed("1 2 2 3 3 3")
        assert pairs(h.process()) == [(1, 1), (2, 2), (3, 3)]
        h.feed("1 2 2 4")
        assert pairs(h.process()) == [(1, 2), (2, 4), (3, 3), (4, 1)]


def test_seed_002_running_counts_update_mode(spark: SparkSession, tmp_path: Path) -> None:
    with PipelineHarness(spark, "wordcount", tmp_path, mode="update") as h:
        h.feed("1 2 2 3 3 3")
        assert pairs(h.process()) == [(1, 1), (2, 2), (3, 3)]
        h.feed("1 2 2 4")
        assert pairs(h.process()) == [(1, 2), (2, 4), (4, 1)]


def test_wordcount_splits_on_whitespace_runs_and_keeps_case(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = ["  The cat\tsat  on the\t\tmat  ", "", "the Cat   sat", "   "]
    expected: dict[str, int] = {}
    for line in lines:
        for word in line.split():
            expected[word] = expected.get(word, 0) + 1
    with PipelineHarness(spark, "wordcount", tmp_path, sink="sqlite", mode="update") as h:
        h.feed(lines)
        h.process()
        assert {r["word"]: r["count"] for r in h.results()} == expected


SEED_003_BATCHES = [
    [("2018-03-02T10:00:00Z", "close", 1), ("2018-03-02T10:00:00Z", "open", 3)],
    [("2018-03-02T10:00:00Z", "close", 2), ("2018-03-02T10:00:00Z", "open", 4)],
    [
        ("2018-03-02T10:00:00Z", "close", 3),
        ("2018-03-02T10:00:00Z", "open", 4),
        ("2018-03-02T10:10:00Z", "open", 1),
    ],
]


def triples(rows: list[dict]) -> list[tuple[str, str, int]]:
    return sorted((r["window_start"], r["action"], r["count"]) for r in rows)


def test_seed_003_mobile_three_files_complete_mode(spark: SparkSession, tmp_path: Path) -> None:
    with PipelineHarness(spark, "mobile", tmp_path, mode="complete") as h:
        for name, expected in zip(
            ("file1.json", "file2.json", "file3.json"), SEED_003_BATCHES, strict=True
        ):
            h.feed((MOBILE_SAMPLES / name).read_text(), name=name)
            assert triples(h.process()) == expected


def test_seed_003_mobile_update_mode_into_sqlite(spark: SparkSession, tmp_path: Path) -> None:
    """Update mode sends only changed rows; the upserted table equals the seed's full result."""
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", mode="update") as h:
        seen: list[str] = []
        for name, expected in zip(
            ("file1.json", "file2.json", "file3.json"), SEED_003_BATCHES, strict=True
        ):
            text = (MOBILE_SAMPLES / name).read_text()
            seen += text.splitlines()
            h.feed(text, name=name)
            h.process()
            table = h.results()
            assert triples(table) == expected
            independent = mobile_counts(seen)
            assert triples(table) == sorted(independent.itertuples(index=False, name=None))
            assert {r["window_end"] for r in table} <= {
                "2018-03-02T10:10:00Z",
                "2018-03-02T10:20:00Z",
            }


def test_mobile_append_mode_writes_only_final_windows_to_parquet(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with PipelineHarness(spark, "mobile", tmp_path, sink=f"parquet:{out}", mode="append") as h:
        for name in ("file1.json", "file2.json", "file3.json"):
            h.feed((MOBILE_SAMPLES / name).read_text(), name=name)
            h.process()
        assert h.results() == []  # watermark 10:00:50: no window has closed yet
        h.feed((MOBILE_SAMPLES / "file4.json").read_text(), name="file4.json")
        h.process()
        # max event time 11:17:29 - 10m = 11:07:29 closes both windows of 10:xx
        assert triples(h.results()) == SEED_003_BATCHES[2]
