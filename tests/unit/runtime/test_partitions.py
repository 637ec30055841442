"""The shuffle partitions a run's new checkpoints get, chosen before Spark starts
(runtime/partitions.py): the user's, the checkpoints' own, else by the trigger."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.analysis.plan import Plan
from slipstream.checkpoint.logs import recorded_conf, recorded_partitions
from slipstream.runtime import runner
from slipstream.runtime.explain import explain
from slipstream.runtime.partitions import (
    HDFS_STORE,
    NO_DATA_BATCHES,
    OPEN_COST,
    OPEN_COST_BYTES,
    STATE_ROWS_COUNTED,
    choose,
    counts_state_rows,
    query_settings,
    row_settings,
    store_settings,
)
from slipstream.settings.config import load_settings


def prepared(tmp_path: Path, **flags: Any) -> runner.Prepared:
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    flags = {"input": [str(landing)], "state_dir": tmp_path / "state", **flags}
    return runner.prepare(load_settings("mobile", flags, environ={}))


PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def offsets(query: Path, batch: int, partitions: str | None, store: str | None = None) -> None:
    """An offsets entry as Spark writes it: a version line, the batch's metadata with the
    session conf Spark fixed, then the source's offset."""
    conf = {} if partitions is None else {"spark.sql.shuffle.partitions": partitions}
    conf.update({} if store is None else {PROVIDER: store})
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": conf}
    (query / "offsets").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps(meta), json.dumps({"logOffset": batch})]
    (query / "offsets" / str(batch)).write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("master", "trigger", "expected"),
    [
        ("local[2]", "default", 1),
        ("local[2]", "5s", 1),
        ("local[2]", "available-now", 2),
        ("local[3]", "once", 3),
        ("local[*]", "available-now", os.cpu_count()),
        ("spark://127.0.0.1:7077", "available-now", None),
    ],
)
def test_a_new_run_sizes_its_partitions_by_its_trigger(
    tmp_path: Path, master: str, trigger: str, expected: int | None
) -> None:
    choice = choose(prepared(tmp_path, master=master, trigger=trigger))
    assert choice.count == expected
    finite = trigger in ("available-now", "once")
    shuffle = {} if expected is None else {"spark.sql.shuffle.partitions": str(expected)}
    # the session's (with a live local run's file splits: the next test); the row count and the
    # store are set while each query starts
    assert {k: v for k, v in choice.conf().items() if k != OPEN_COST} == shuffle
    # a finite run on RocksDB does not count its rows; Spark's own store (a small backfill's on
    # a local master) always does
    assert choice.count_rows is not (finite and choice.store is None)


@pytest.mark.parametrize(
    ("master", "dedup", "trigger", "expected"),
    [
        ("local[2]", "timers", "default", 2),
        ("local[3]", "timers", "5s", 3),
        ("local[2]", "within-watermark", "default", 1),
        ("local[2]", "auto", "default", 1),
        ("spark://127.0.0.1:7077", "timers", "default", None),
    ],
)
def test_a_live_run_deduplicating_by_timers_gets_a_partition_per_core(
    tmp_path: Path, master: str, dedup: str, trigger: str, expected: int | None
) -> None:
    """The processor's work per id is the batch's largest cost: one partition would leave it
    to one core."""
    (tmp_path / "in").mkdir()
    (tmp_path / "catalog.csv").write_text("article_id,title,section,published_at\na1,T,s,\n")
    flags = {
        "input": [str(tmp_path / "in"), f"catalog={tmp_path / 'catalog.csv'}"],
        "state_dir": tmp_path / "state",
        "master": master,
        "trigger": trigger,
    }
    settings = load_settings("trending", flags, environ={}, params={"dedup": dedup})
    choice = choose(runner.prepare(settings))
    assert choice.count == expected
    if expected and expected > 1:
        assert "deduplicating by timers, one partition per core" in choice.describe()
    uncounted = "state rows of a query deduplicating by timers: not counted"
    assert (uncounted in choice.describe()) is (dedup == "timers")


@pytest.mark.parametrize(
    "conf", [{PROVIDER: ROCKSDB}, {PROVIDER: ROCKSDB, STATE_ROWS_COUNTED: "true"}]
)
@pytest.mark.parametrize("trigger", ["default", "available-now"])
def test_a_query_deduplicating_by_timers_never_counts_its_state_rows(
    tmp_path: Path, trigger: str, conf: dict[str, str]
) -> None:
    """Its ids are its timers, which Spark's store does not count: counting would only add a
    read before every write. The query beside it follows the run."""
    run = prepared(tmp_path, master="local[2]", trigger=trigger, conf=conf)
    session = SimpleNamespace(conf={PROVIDER: ROCKSDB})
    timers = Plan(steps=(), arbitrary_state=True, dedup_timers=True)
    assert query_settings(session, run, timers, "update")[STATE_ROWS_COUNTED] == "false"  # type: ignore[arg-type]
    other = query_settings(session, run, Plan(steps=()), "update")  # type: ignore[arg-type]
    counted = trigger == "default" or STATE_ROWS_COUNTED in conf
    assert (STATE_ROWS_COUNTED not in other) is counted


@pytest.mark.parametrize(
    ("master", "trigger", "conf", "expected"),
    [
        ("local[2]", "default", {}, str(OPEN_COST_BYTES)),
        ("local[2]", "5s", {}, str(OPEN_COST_BYTES)),
        ("local[*]", "default", {}, str(OPEN_COST_BYTES)),
        ("local[2]", "available-now", {}, None),  # a backfill's batches hold many files
        ("local[2]", "once", {}, None),
        ("local[2]", "real-time", {}, None),  # topics only: no file reads
        ("spark://127.0.0.1:7077", "default", {}, None),  # a cluster's own
        ("local[2]", "default", {OPEN_COST: "4194304"}, None),  # the user's, in their --conf
    ],
)
def test_a_live_run_on_a_local_master_splits_its_file_reads_across_the_cores(
    tmp_path: Path, master: str, trigger: str, conf: dict[str, str], expected: str | None
) -> None:
    run = prepared(tmp_path, master=master, trigger=trigger, conf=conf)
    choice = choose(run)
    assert choice.conf().get(OPEN_COST) == expected
    said = "file reads: a file's opening counted as 8,192 bytes" in choice.describe()
    assert said is (expected is not None)


@pytest.mark.parametrize(
    ("master", "trigger", "conf", "expected"),
    [
        ("local[2]", "default", {}, HDFS_STORE),
        ("local[2]", "5s", {}, HDFS_STORE),
        ("local[2]", "available-now", {}, HDFS_STORE),  # a small backfill (an empty folder)
        ("local[2]", "once", {}, HDFS_STORE),
        ("local[2]", "real-time", {}, None),
        ("spark://127.0.0.1:7077", "default", {}, None),
        ("local[2]", "default", {PROVIDER: ROCKSDB}, ROCKSDB),  # the user's
    ],
)
def test_a_new_micro_batch_run_on_a_local_master_gets_sparks_own_state_store(
    tmp_path: Path, master: str, trigger: str, conf: dict[str, str], expected: str | None
) -> None:
    run = prepared(tmp_path, master=master, trigger=trigger, conf=conf)
    assert choose(run).store == expected
    assert PROVIDER not in choose(run).conf()  # never the session's: each query's, at start
    assert store_settings(run, Plan(steps=())) == ({} if expected is None else {PROVIDER: expected})
    said = explain(prepared(tmp_path, master=master, trigger=trigger, conf=conf))
    shown = "the session's (RocksDB)" if expected is None else expected.rsplit(".", 1)[-1]
    assert f"state store {shown}: " in said


@pytest.mark.parametrize(
    ("memory", "landed_mib", "expected"),
    [
        ("1g", 100, HDFS_STORE),  # within 1/8 of the heap (128 MiB)
        ("1g", 200, None),  # over it: RocksDB, the session's
        ("4g", 200, HDFS_STORE),
        ("4g", 600, None),
    ],
)
def test_a_backfill_keeps_its_state_in_the_heap_only_when_its_input_is_small_beside_it(
    tmp_path: Path, memory: str, landed_mib: int, expected: str | None
) -> None:
    landing = tmp_path / "landing"
    (landing / "day=1").mkdir(parents=True)
    # sparse files: the sizes Spark would read, no disk used
    os.truncate(_touch(landing / "a.json"), landed_mib * 2**20 // 2)
    os.truncate(_touch(landing / "day=1" / "b.json"), landed_mib * 2**20 // 2)
    os.truncate(_touch(landing / "_hidden.json"), 10 * 2**30)  # Spark skips these: not counted
    os.truncate(_touch(landing / "day=1" / ".part.tmp"), 10 * 2**30)
    conf = {"spark.driver.memory": memory}
    run = prepared(tmp_path, master="local[2]", trigger="available-now", conf=conf)
    assert choose(run).store == expected
    said = explain(run)
    assert f"a backfill of {landed_mib:,} MiB, " in said
    assert ("within 1/8 of the driver's" in said) is (expected is not None)
    live = prepared(tmp_path, master="local[2]", trigger="default", conf=conf)
    assert choose(live).store == HDFS_STORE  # a live run's rule does not look at the backlog


def test_a_backfill_of_a_topic_keeps_rocksdb(tmp_path: Path) -> None:
    run = runner.prepare(
        load_settings(
            "mobile",
            {"input": ["kafka://127.0.0.1:9/actions"], "state_dir": tmp_path / "state",
             "master": "local[2]", "trigger": "available-now"},
            environ={},
        ),
        check_source=False,
    )  # fmt: skip
    assert choose(run).store is None
    assert "a backfill of a size not known before it starts" in explain(run)


def _touch(path: Path) -> Path:
    path.touch()
    return path


def test_checkpoints_keep_their_own_state_store(tmp_path: Path) -> None:
    query = tmp_path / "state" / "checkpoints" / "mobile" / "counts"
    offsets(query, 0, "1", ROCKSDB)
    assert recorded_conf(query, PROVIDER) == ROCKSDB
    choice = choose(prepared(tmp_path, master="local[2]", trigger="default"))
    assert choice.store == ROCKSDB  # not the HDFS-backed store a new live run would get
    assert "state store RocksDBStateStoreProvider: the checkpoints' own" in explain(
        prepared(tmp_path, master="local[2]")
    )


@pytest.mark.parametrize(("trigger", "given", "counted"), [
    ("available-now", "true", True),
    ("available-now", "FALSE", False),
    ("default", "false", False),
    ("default", None, True),
])  # fmt: skip
def test_a_finite_run_does_not_count_state_rows_unless_told(
    tmp_path: Path, trigger: str, given: str | None, counted: bool
) -> None:
    conf = {PROVIDER: ROCKSDB} if given is None else {STATE_ROWS_COUNTED: given, PROVIDER: ROCKSDB}
    choice = choose(prepared(tmp_path, master="local[2]", trigger=trigger, conf=conf))
    assert choice.count_rows is counted
    settings = prepared(tmp_path, master="local[2]", trigger=trigger, conf=conf).settings
    assert row_settings(settings) == ({} if counted else {STATE_ROWS_COUNTED: "false"})
    said = explain(prepared(tmp_path, master="local[2]", trigger=trigger, conf=conf))
    assert ("state rows not counted in a finite run" in said) is not counted


def test_the_users_conf_wins(tmp_path: Path) -> None:
    given = {"spark.sql.shuffle.partitions": "7"}
    assert choose(prepared(tmp_path, master="local[2]", conf=given)).count == 7


def test_checkpoints_keep_their_own_number(tmp_path: Path) -> None:
    query = tmp_path / "state" / "checkpoints" / "mobile" / "counts"
    offsets(query, 0, "4")
    offsets(query, 1, "4")
    assert recorded_partitions(query) == 4
    choice = choose(prepared(tmp_path, master="local[2]", trigger="default"))
    assert choice.count == 4  # not the 1 a new live run would get
    assert "state partitions 4: the checkpoints' own" in explain(
        prepared(tmp_path, master="local[2]")
    )


def test_a_checkpoint_without_the_entry_says_nothing(tmp_path: Path) -> None:
    query = tmp_path / "q"
    assert recorded_partitions(query) is None  # no offsets
    offsets(query, 0, None)
    assert recorded_partitions(query) is None
    (query / "offsets" / "1").write_text("v1\n")  # a batch cut short
    assert recorded_partitions(query) is None


@pytest.mark.parametrize("trigger", ["default", "available-now"])
def test_a_query_with_arbitrary_state_keeps_rocksdb_under_sparks_own_store(
    tmp_path: Path, trigger: str
) -> None:
    expected = {PROVIDER: ROCKSDB}
    """transformWithState needs RocksDB: its query is given it while it starts."""
    run = prepared(tmp_path, master="local[2]", trigger=trigger)
    assert store_settings(run, Plan(steps=(), arbitrary_state=True)) == expected


def test_a_backfill_under_spark_submit_is_judged_against_the_heap_spark_submit_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under spark-submit the heap is fixed before slipstream runs (Spark's 1g unless told):
    not the quarter of RAM a session slipstream builds would get."""
    import pyspark

    given: dict[str, str] = {}

    class SubmittedConf:  # spark-submit's JVM's conf, as SparkConf reads it
        def get(self, key: str, default: str | None = None) -> str | None:
            return {"spark.master": "local[2]", **given}.get(key, default)

    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    monkeypatch.setattr(pyspark.SparkContext, "_ensure_initialized", classmethod(lambda c: None))
    monkeypatch.setattr(pyspark, "SparkConf", SubmittedConf)
    landing = tmp_path / "landing"
    landing.mkdir()
    os.truncate(_touch(landing / "a.json"), 200 * 2**20)
    run = runner.prepare(
        load_settings(
            "mobile",
            {"input": [str(landing)], "state_dir": tmp_path / "state", "trigger": "available-now"},
            environ={},
        )
    )
    assert choose(run).store is None  # 200 MiB over 1/8 of Spark's default 1g
    assert "over 1/8 of the driver's 1,024 MiB heap" in choose(run).describe()
    given["spark.driver.memory"] = "4g"
    assert choose(run).store == HDFS_STORE


@pytest.mark.parametrize(
    ("conf", "arbitrary", "expected"),
    [
        # a small backfill on Spark's own store counts its rows in every query, the one given
        # RocksDB for its arbitrary state too (the batch lines count: no false 0)
        ({}, False, {PROVIDER: HDFS_STORE}),
        ({}, True, {PROVIDER: ROCKSDB}),
        # a backfill on RocksDB does not count them
        ({PROVIDER: ROCKSDB}, False, {PROVIDER: ROCKSDB, STATE_ROWS_COUNTED: "false"}),
    ],
)
def test_a_querys_row_count_follows_the_runs_store(
    tmp_path: Path, conf: dict[str, str], arbitrary: bool, expected: dict[str, str]
) -> None:
    run = prepared(tmp_path, master="local[2]", trigger="available-now", conf=conf)
    session = SimpleNamespace(conf={PROVIDER: ROCKSDB})  # the session's own (settings/session.py)
    counted = STATE_ROWS_COUNTED not in expected
    assert counts_state_rows(session, run) is counted  # type: ignore[arg-type]
    plan = Plan(steps=(), arbitrary_state=arbitrary)
    assert query_settings(session, run, plan, "update") == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("trigger", "mode", "arbitrary", "conf", "expected"), [
    ("default", "update", False, {}, "false"),
    ("5s", "complete", False, {}, "false"),
    ("default", "append", False, {}, None),  # it emits the windows the watermark closes
    ("default", "update", True, {}, None),  # timers fire in batches of no data
    ("available-now", "update", False, {}, None),  # a finite run's last batch
    ("default", "update", False, {NO_DATA_BATCHES: "true"}, "true"),  # the user's, per query
    ("available-now", "append", False, {NO_DATA_BATCHES: "false"}, "false"),
])  # fmt: skip
def test_a_live_runs_upserted_outputs_skip_batches_of_no_data(
    tmp_path: Path,
    trigger: str,
    mode: str,
    arbitrary: bool,
    conf: dict[str, str],
    expected: str | None,
) -> None:
    run = prepared(tmp_path, master="local[2]", trigger=trigger, conf=conf)
    session = SimpleNamespace(conf={PROVIDER: ROCKSDB})
    plan = Plan(steps=(), arbitrary_state=arbitrary)
    own = query_settings(session, run, plan, mode)  # type: ignore[arg-type]
    assert own.get(NO_DATA_BATCHES) == expected
    said = explain(run)
    assert ("batches of no data: skipped by a live run's update" in said) is (
        trigger in ("default", "5s") and not conf
    )
