"""The warm test loop (slipstream.testing.loop): two runs of a user's test in this one process,
the user's module edited between them. Both runs see the same SparkContext (no second JVM),
and the second sees the edit. The wait for a change is injected (the edit itself): no sleeps."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.testing.loop import Snapshot, loop, snapshot

USER_TEST = """
from pathlib import Path

from slipstream.testing import session

import counting


def test_counting_counts_with_spark():
    spark = session()
    n = spark.range(counting.VALUE).count()
    seen = Path(__file__).parent / "seen.txt"
    with seen.open("a") as f:
        f.write(f"{spark.sparkContext.applicationId} {n}\\n")
    assert n == counting.VALUE
"""


@pytest.mark.spark
def test_two_runs_share_one_spark_and_the_second_sees_the_edit(
    spark: SparkSession, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "counting.py").write_text("VALUE = 1\n")
    (project / "test_counting.py").write_text(USER_TEST)
    edits: list[bool] = []

    def edit(roots: Sequence[Path], before: Snapshot) -> None:
        assert roots == [project]
        (project / "counting.py").write_text("VALUE = 22\n")  # the edit a user saves
        edits.append(snapshot(roots) != before)

    out = io.StringIO()
    code = loop([str(project)], ["-q", "-p", "no:cacheprovider"], out=out, runs=2, changed=edit)
    assert code == 0, out.getvalue()
    app = spark.sparkContext.applicationId
    assert (project / "seen.txt").read_text().splitlines() == [f"{app} 1", f"{app} 22"]
    assert edits == [True]  # the loop's snapshot sees the edit
    assert out.getvalue().count(f"(the same Spark, {app})") == 2
