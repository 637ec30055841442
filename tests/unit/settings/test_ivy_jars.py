"""Packages reach Spark as the local jars Ivy resolved them to, once listed (settings/ivy_jars.py):
the listing runs once per set of packages, a run after it starts no spark-submit and names no
package, a jar gone from the cache brings the listing back, and a failed listing leaves the
packages to Spark as before. That the listed jars work is the Kafka, Delta and real-time suites'
to prove (tests/e2e/kafka, tests/e2e/delta: every run there starts through this)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from slipstream.settings import kafka_connector
from slipstream.settings.ivy_jars import MARK, as_local_jars, memo_path
from slipstream.settings.kafka_connector import PACKAGES

COORDINATE = "org.example:connector_2.13:1.0.0"


class FakeSubmit:
    """spark-submit of the listing script: prints the jars it 'resolved' (made in IVY/jars),
    beside one that is not Ivy's (pyspark's own, on every Python path it sets)."""

    def __init__(self, ivy: Path, names: list[str], code: int = 0) -> None:
        self.jars = [ivy / "jars" / name for name in names]
        self.code = code
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        for jar in self.jars:
            jar.parent.mkdir(parents=True, exist_ok=True)
            jar.touch()
        paths = [str(j) for j in self.jars] + ["/opt/pyspark/jars/spark-core_2.13.jar"]
        out = f"other output\n{MARK}{json.dumps(paths)}\n"
        return subprocess.CompletedProcess(argv, self.code, out, "")


@pytest.fixture
def settings(tmp_path: Path) -> dict[str, str]:
    return {
        "spark.jars": "/pkg/slipstream-parse.jar",
        PACKAGES: COORDINATE,
        "spark.jars.ivy": str(tmp_path / "ivy"),
        "spark.sql.shuffle.partitions": "2",
    }


def test_packages_become_their_listed_jars_and_the_list_is_kept(
    settings: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit = FakeSubmit(tmp_path / "ivy", ["a_b-1.jar", "c_d-2.jar"])
    monkeypatch.setattr(kafka_connector.subprocess, "run", submit)
    pinned = as_local_jars(settings)
    jars = [str(j) for j in submit.jars]
    assert PACKAGES not in pinned
    assert pinned["spark.jars"].split(",") == ["/pkg/slipstream-parse.jar", *jars]
    assert pinned["spark.sql.shuffle.partitions"] == "2"
    assert len(submit.calls) == 1
    argv = submit.calls[0]
    assert argv[argv.index("--packages") + 1] == COORDINATE
    assert f"--conf=spark.jars.ivy={tmp_path / 'ivy'}" in argv  # the same Ivy folder
    assert memo_path(settings).read_text().split() == jars
    # the next run: the kept list, no spark-submit
    assert as_local_jars(settings) == pinned
    assert len(submit.calls) == 1


def test_another_set_of_packages_or_repositories_is_listed_on_its_own(
    settings: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit = FakeSubmit(tmp_path / "ivy", ["a_b-1.jar"])
    monkeypatch.setattr(kafka_connector.subprocess, "run", submit)
    as_local_jars(settings)
    as_local_jars({**settings, PACKAGES: f"{COORDINATE},org.example:other:2.0"})
    as_local_jars({**settings, "spark.jars.repositories": "https://mirror.example/maven"})
    assert len(submit.calls) == 3


def test_a_jar_gone_from_the_cache_lists_them_again(
    settings: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit = FakeSubmit(tmp_path / "ivy", ["a_b-1.jar", "c_d-2.jar"])
    monkeypatch.setattr(kafka_connector.subprocess, "run", submit)
    as_local_jars(settings)
    submit.jars[1].unlink()
    pinned = as_local_jars(settings)
    assert len(submit.calls) == 2
    assert str(submit.jars[1]) in pinned["spark.jars"]


def test_a_failed_listing_leaves_the_packages_to_spark(
    settings: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit = FakeSubmit(tmp_path / "ivy", ["a_b-1.jar"], code=1)
    monkeypatch.setattr(kafka_connector.subprocess, "run", submit)
    assert as_local_jars(settings) == settings
    assert not memo_path(settings).exists()


def test_no_packages_no_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    submit = FakeSubmit(tmp_path / "ivy", ["a_b-1.jar"])
    monkeypatch.setattr(kafka_connector.subprocess, "run", submit)
    settings = {"spark.jars": "/pkg/slipstream-parse.jar", "spark.jars.ivy": str(tmp_path)}
    assert as_local_jars(settings) == settings
    assert submit.calls == []
