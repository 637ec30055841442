"""Connector jars resolved before Spark starts (settings/kafka_connector.py, `resolve_all`): one
resolution at a time per Ivy folder, across processes. Two runs started at once on a fresh
machine once downloaded into the same Ivy files and failed each other with
CONNECTOR_UNAVAILABLE ("download failed"; the fault campaign's seeds 265 and 374 on a fresh
machine, a Delta run each, 2026-11-30)."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from slipstream.errors import ConfigError
from slipstream.settings import kafka_connector
from slipstream.settings.kafka_connector import LOCK_FILE, ivy_jar, resolve_all, unavailable

COORDINATE = "org.example:connector_2.13:1.0.0"


def held(lock: Path) -> bool:
    """Whether another open file holds the lock (flock excludes across open files, in one
    process as across processes)."""
    with lock.open("a") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(other, fcntl.LOCK_UN)
        return False


def test_a_resolution_holds_the_ivy_folders_lock_and_the_next_finds_the_jar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = {"spark.jars.ivy": str(tmp_path / "ivy")}
    jar = ivy_jar(COORDINATE, conf)
    lock = tmp_path / "ivy" / LOCK_FILE
    seen: list[bool] = []

    def spark_submit(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert COORDINATE in argv
        seen.append(held(lock))  # another process asking now would wait
        jar.parent.mkdir(parents=True, exist_ok=True)
        jar.touch()
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(kafka_connector.subprocess, "run", spark_submit)
    assert resolve_all([COORDINATE], conf, unavailable) >= 0
    assert seen == [True]
    assert not held(lock)  # released once resolved
    # the next run (the one that waited) asks under the lock, finds the jar: no spark-submit
    assert resolve_all([COORDINATE], conf, unavailable) == 0.0
    assert seen == [True]


def test_an_ivy_folder_without_room_for_the_lock_still_asks_ivy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the Ivy folder's parent should be: no lock file
    conf = {"spark.jars.ivy": str(blocked / "ivy")}
    calls: list[list[str]] = []

    def spark_submit(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "[unresolved dependency: x: not found]")

    monkeypatch.setattr(kafka_connector.subprocess, "run", spark_submit)
    with pytest.raises(ConfigError) as err:
        resolve_all([COORDINATE], conf, unavailable)
    assert len(calls) == 1
    assert err.value.message.endswith("unresolved dependency: x: not found")


def test_a_failed_download_is_named_not_the_last_line_of_the_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Ivy printed when two resolutions downloaded into the same files at once."""
    failed = (
        ":: FAILED DOWNLOADS ::\n"
        'Exception in thread "main" java.lang.RuntimeException: [download failed: '
        "org.xerial.snappy#snappy-java;1.1.10.8!snappy-java.jar(bundle)]\n"
        "\tat org.apache.spark.deploy.SparkSubmit.main(SparkSubmit.scala)\n"
    )
    monkeypatch.setattr(
        kafka_connector.subprocess,
        "run",
        lambda argv, **_: subprocess.CompletedProcess(argv, 1, "", failed),
    )
    conf = {"spark.jars.ivy": str(tmp_path / "ivy")}
    with pytest.raises(ConfigError) as err:
        resolve_all([COORDINATE], conf, unavailable)
    assert err.value.code == "CONNECTOR_UNAVAILABLE"
    assert err.value.message.endswith(
        "could not be resolved from Maven Central: download failed: "
        "org.xerial.snappy#snappy-java;1.1.10.8!snappy-java.jar(bundle)"
    )
