"""Delta Lake's jar and settings for a session (settings/delta_package.py), no Spark, no network:
the repository's answer and Ivy's resolution are stubbed."""

from __future__ import annotations

from pathlib import Path

import pytest

from slipstream.core import spark_line
from slipstream.errors import ConfigError
from slipstream.settings import delta_package


@pytest.fixture
def on_42(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    resolved: list[list[str]] = []
    monkeypatch.setattr(spark_line, "version", lambda: "4.2.0")
    monkeypatch.setattr(delta_package, "python_version", lambda: "4.4.1")
    monkeypatch.setattr(
        delta_package, "served_versions", lambda conf, group, artifact: ["4.3.1", "4.4.0"]
    )
    monkeypatch.setattr(
        delta_package, "resolve_all", lambda wanted, conf, fail: resolved.append(wanted) or 0.0
    )
    return resolved


def test_the_served_jar_the_extension_and_the_catalog(
    on_42: list[list[str]], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    ivy = str(tmp_path / "ivy")
    conf = delta_package.delta_conf({"spark.jars.packages": "org.x:y:1", "spark.jars.ivy": ivy})
    assert conf["spark.jars.packages"] == "org.x:y:1,io.delta:delta-spark_2.13:4.4.0"
    assert conf["spark.sql.extensions"] == delta_package.EXTENSION
    assert conf["spark.sql.catalog.spark_catalog"] == delta_package.CATALOG
    assert on_42 == [["io.delta:delta-spark_2.13:4.4.0"]]  # resolved first, output captured
    said = [r.getMessage() for r in caplog.records if "Delta Lake" in r.getMessage()]
    assert len(said) == 1 and "4.4.0" in said[0] and "4.4.1" in said[0]


def test_the_users_own_jar_wins(on_42: list[list[str]]) -> None:
    conf = delta_package.delta_conf({"spark.jars": "/opt/delta-spark_2.13-4.4.0.jar"})
    assert "spark.jars.packages" not in conf and on_42 == []
    assert conf["spark.sql.extensions"] == delta_package.EXTENSION


def test_off_the_42_line_delta_is_refused_before_the_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    with pytest.raises(ConfigError) as refused:
        delta_package.delta_conf({})
    assert refused.value.code == "DELTA_UNAVAILABLE"
    assert "slipstream[delta]" in refused.value.render()


def test_a_cached_choice_asks_no_repository_and_offline_the_cache_answers(
    on_42: list[list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = {"spark.jars.ivy": str(tmp_path)}
    assert delta_package.coordinate(conf).endswith(":4.4.0")  # served: remembered
    jar = tmp_path / "jars" / "io.delta_delta-spark_2.13-4.4.0.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"")  # what Ivy's resolution leaves
    asked: list[str] = []
    monkeypatch.setattr(
        delta_package, "served_versions", lambda conf, group, artifact: asked.append(group)
    )
    assert delta_package.coordinate(conf).endswith(":4.4.0") and asked == []
    (tmp_path / "slipstream-delta-for-4.4.1").unlink()
    assert delta_package.coordinate(conf).endswith(":4.4.0")  # no repository: the cache's
    assert asked == ["io.delta"]


def test_a_local_master_rebuilds_snapshots_in_as_many_partitions_as_cores(
    on_42: list[list[str]],
) -> None:
    assert delta_package.delta_conf({}, local_cores=2)[delta_package.SNAPSHOT_PARTITIONS] == "2"
    assert delta_package.SNAPSHOT_PARTITIONS not in delta_package.delta_conf({})  # a cluster
    theirs = {delta_package.SNAPSHOT_PARTITIONS: "50"}
    assert delta_package.SNAPSHOT_PARTITIONS not in delta_package.delta_conf(theirs, 2)


def test_the_session_builder_gives_delta_a_local_masters_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slipstream.settings import session

    class Stop(Exception):
        pass

    seen: list[int | None] = []

    def chosen(conf: object, local_cores: int | None = None) -> dict[str, str]:
        seen.append(local_cores)
        raise Stop  # before any JVM

    monkeypatch.setattr(session, "delta_conf", chosen)
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    for master in ("local[3]", "spark://127.0.0.1:7077"):
        with pytest.raises(Stop):
            session.build_session(master, {}, delta=True)
    assert seen == [3, None]
