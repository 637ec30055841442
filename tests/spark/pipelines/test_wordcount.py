"""wordcount over what `generate wordcount` writes: every word's running count against a plain
Python count of the generated files (split on runs of whitespace, case kept)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.app.cli import main
from slipstream.testing import PipelineHarness


@pytest.mark.spark
def test_every_words_count_equals_a_plain_count_of_the_generated_lines(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "generated"
    assert main(["generate", "wordcount", "--out", str(landing), "--lines", "300",
                 "--lines-per-file", "150", "--seed", "3"]) == 0  # fmt: skip
    files = [p.read_text().splitlines() for p in sorted(landing.glob("lines-*.txt"))]
    assert len(files) == 2
    want = Counter(word for lines in files for line in lines for word in line.split())
    with PipelineHarness(spark, "wordcount", tmp_path, sink="sqlite", mode="update") as h:
        for lines in files:
            h.feed(lines)
        h.process()
        got = {r["word"]: r["count"] for r in h.results()}
    assert got == dict(want)
    assert "The" in got and "the" in got  # case kept
