"""Spark inside the benchmark process: the session, a progress collector, query helpers, memory.

Scenarios that compare variants in one JVM (the ceiling, the toolkit overhead, the flagship
against a batch job) share one SparkSession built by slipstream's own builder, so every figure
is taken with slipstream's defaults unless a variant says otherwise."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from bench.procs import cpu_seconds_of, stat_fields
from slipstream.monitor.listener import JsonProgressListener

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
PARTITIONS_KEY = "spark.sql.shuffle.partitions"
#: what a plain Spark session has where slipstream's local sessions differ: Spark's own state
#: store (HDFS-backed) and its file-listing threshold (a job to look up over 32 files)
SPARK_OWN = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "32",
}
#: Hadoop's own local file system, as a plain PySpark session has it (without Hadoop's native
#: library a `chmod` process per file written; slipstream's sessions use its LocalFiles.java).
#: For a JVM of its own: Hadoop keeps a JVM's file system, so variants sharing one JVM share it.
HADOOP_FILES = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
}
ROWS_COUNTED_KEY = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
NO_DATA_KEY = "spark.sql.streaming.noDataMicroBatches.enabled"
#: settings slipstream sets while each query starts (a variant passes them as --conf)
PER_QUERY = (ROWS_COUNTED_KEY, NO_DATA_KEY, PROVIDER_KEY)

#: the state store variants a scenario can ask for, as the SQL confs that select them
STATE_STORES: dict[str, dict[str, str]] = {
    "hdfs": {PROVIDER_KEY: HDFS_PROVIDER, CHANGELOG_KEY: "false"},
    "rocksdb": {PROVIDER_KEY: ROCKSDB_PROVIDER, CHANGELOG_KEY: "false"},
    "rocksdb+changelog": {PROVIDER_KEY: ROCKSDB_PROVIDER, CHANGELOG_KEY: "true"},
    # the state's rows counted (a live run's) or not (a finite run's: runtime/partitions.py)
    "rocksdb+changelog, rows counted": {
        PROVIDER_KEY: ROCKSDB_PROVIDER,
        CHANGELOG_KEY: "true",
        ROWS_COUNTED_KEY: "true",
    },
    "rocksdb+changelog, rows not counted": {
        PROVIDER_KEY: ROCKSDB_PROVIDER,
        CHANGELOG_KEY: "true",
        ROWS_COUNTED_KEY: "false",
    },
}

#: How often Spark's state store maintenance runs in the benchmark's session (Spark's default:
#: 60 s). It unloads the state of a query that stopped: every variant's runs share one JVM, and
#: a run over 1,000,000 events left about 290 MiB of state in the heap for up to a minute, which
#: the next runs paid for in collections (docs/benchmarks.md section 43; a user's backfill is a
#: process of its own). The live queries of scenarios in the same process (1 and 2) run with it
#: too, every variant alike; `bench.liveprofile`, a live run in a process of its own, does not.
FINITE_MAINTENANCE = "2s"
MAINTENANCE_KEY = "spark.sql.streaming.stateStore.maintenanceInterval"

_session: SparkSession | None = None
_collector: ProgressCollector | None = None


def session(*, finite: bool = True) -> SparkSession:
    """The benchmark's SparkSession: slipstream's `build_session` with its defaults; for
    `finite` runs (the scenarios' available-now variants), the state of a stopped query
    unloaded within FINITE_MAINTENANCE. The process's first call decides."""
    global _session, _collector
    if _session is None:
        from slipstream.settings.session import build_session

        conf = {MAINTENANCE_KEY: FINITE_MAINTENANCE} if finite else {}
        _session = build_session(conf=conf, app_name="slipstream-bench", log_level="ERROR")
        _collector = ProgressCollector()
        _session.streams.addListener(_collector)
        quiet_stop_noise(_session)
    return _session


def quiet_stop_noise(spark: SparkSession) -> None:
    """Stopping a query mid-batch makes Spark log ERRORs about the aborted write and a
    broadcast it could not store; the benchmark stops unbounded queries on purpose, so these
    loggers are silenced (failures still surface as the query's exception)."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    for logger in (
        "org.apache.spark.broadcast.TorrentBroadcast",
        "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
        "org.apache.spark.storage.ShuffleBlockFetcherIterator",
        "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
        "org.apache.spark.util.Utils",  # "Aborting task" + InterruptedException on stop
    ):
        with contextlib.suppress(Exception):
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                logger, jvm.org.apache.logging.log4j.Level.OFF
            )


def collector() -> ProgressCollector:
    session()
    assert _collector is not None
    return _collector


def stop_session() -> None:
    global _session, _collector
    if _session is not None:
        _session.stop()
    _session = None
    _collector = None


@contextlib.contextmanager
def sql_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set SQL confs for the queries started inside the block; restore them after."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


class ProgressCollector(JsonProgressListener):
    """Every progress report of every query, by query id; waiters wake on each new one.

    Its events cross from the JVM as JSON text (slipstream's bridge): on PySpark's own, each
    field read with a call of its own, the collector's conversions held back every other
    listener's events (0.1-0.7 s after a batch, docs/benchmarks.md section 53)."""

    def __init__(self) -> None:
        self._progress: dict[str, list[dict[str, Any]]] = {}
        self._changed = threading.Condition()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def on_progress(self, progress: dict[str, Any]) -> None:
        with self._changed:
            self._progress.setdefault(str(progress["id"]), []).append(progress)
            self._changed.notify_all()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self._changed:
            self._changed.notify_all()

    def executed(self, query: StreamingQuery) -> list[dict[str, Any]]:
        with self._changed:
            return [p for p in self._progress.get(str(query.id), []) if ran(p)]

    def wait_executed(self, query: StreamingQuery, count: int, timeout: float) -> bool:
        """Until `count` batches of `query` ran (or it died, or `timeout` seconds passed)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                done = [p for p in self._progress.get(str(query.id), []) if ran(p)]
                if len(done) >= count or not query.isActive:
                    return len(done) >= count
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 1.0))


def ran(progress: Mapping[str, Any]) -> bool:
    """A progress report of a batch that executed (idle reports carry no addBatch time)."""
    return "addBatch" in (progress.get("durationMs") or {})


def batch_stats(batches: list[dict[str, Any]]) -> dict[str, float]:
    """Rows, time and rows/s over executed batches, from Spark's own per-batch timings."""
    rows = sum(int(p.get("numInputRows") or 0) for p in batches)
    ms = sum(float(p["durationMs"].get("triggerExecution", 0)) for p in batches)
    return {
        "batches": len(batches),
        "rows": rows,
        "rows_per_s": rows / (ms / 1000) if ms else float("nan"),
        "ms_per_batch": ms / len(batches) if batches else float("nan"),
    }


def run_batches(
    query: StreamingQuery, warmup: int, measured: int, timeout: float = 600
) -> dict[str, float]:
    """Let an unbounded query run `warmup + measured` batches, stop it, and measure the last
    `measured` ones (the first batches pay for planning, code generation and state setup)."""
    coll = collector()
    try:
        ok = coll.wait_executed(query, warmup + measured, timeout)
        if not ok:
            error = query.exception()
            raise RuntimeError(
                f"query {query.name} did not run {warmup + measured} batches in {timeout:.0f} s"
                + (f": {error}" if error else "")
            )
    finally:
        query.stop()
    batches = coll.executed(query)[warmup : warmup + measured]
    return batch_stats(batches)


def windowed_count(frame: DataFrame, keys: int = 100, window: str = "10 seconds") -> DataFrame:
    """The reference query: event-time tumbling window x `keys` keys, count, with watermark."""
    return (
        frame.withWatermark("timestamp", window)
        .groupBy(F.window("timestamp", window), (F.col("value") % keys).alias("key"))
        .count()
    )


def raw_lines(spark: SparkSession, folder: Path, stream: bool = False) -> DataFrame:
    """The lines of the files in `folder` as the runner reads them: `value`, and `_source` (the
    file's path)."""
    reader = spark.readStream if stream else spark.read
    return reader.text(str(folder)).select("value", F.col("_metadata.file_path").alias("_source"))


def parsed_lines(
    spark: SparkSession, folder: Path, schema: Any, required: Any, stream: bool = False
) -> DataFrame:
    """The valid records of those lines, by slipstream's parser, as one query (no quarantine)."""
    from slipstream.ingest.parse import parse_json
    from slipstream.ingest.quarantine import accepted

    return accepted(parse_json(raw_lines(spark, folder, stream), schema, required))


def start_run(
    spark: SparkSession, pipeline: str, flags: Mapping[str, Any], declared: Any = None
) -> Any:
    """A slipstream run started as the CLI starts it: settings from `flags`, no environment
    (`declared`: a Pipeline object not in the registry). `flags` must name `ingest_stage`."""
    from bench.stage import require_setting
    from slipstream.runtime import runner
    from slipstream.settings.config import load_settings

    require_setting(flags, f"a run of {pipeline}")
    settings = load_settings(pipeline, dict(flags), environ={})
    return runner.start(spark, runner.prepare(settings, declared))


def start_noop(
    frame: DataFrame,
    name: str | None,
    checkpoint: Path,
    mode: str = "update",
    available_now: bool = False,
) -> StreamingQuery:
    writer = frame.writeStream.format("noop").outputMode(mode)
    if name is not None:
        writer = writer.queryName(name)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.option("checkpointLocation", str(checkpoint)).start()


def jvm_memory(spark: SparkSession, gc: bool = False) -> dict[str, float]:
    """The driver JVM (which runs the executors in local mode): heap used and process RSS, MiB."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    runtime = jvm.java.lang.Runtime.getRuntime()
    if gc:
        jvm.java.lang.System.gc()
    heap = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    return {"heap_mib": heap, "rss_mib": rss_mib(pid), "heap_max_mib": runtime.maxMemory() / 2**20}


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


_counter = iter(range(1, 10**9))


def unique() -> int:
    """A fresh number for checkpoint and query names within this process."""
    return next(_counter)


def cpu_seconds(spark: SparkSession) -> float:
    """CPU seconds used so far by the session's JVM and by this process."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    jvm = cpu_seconds_of(stat_fields(Path(f"/proc/{pid}/stat").read_text()))
    mine = os.times()
    return jvm + mine.user + mine.system


def bare_outputs(
    spark: SparkSession,
    pipeline: str,
    paths: Mapping[str, Path],
    options: Mapping[str, str] | None = None,
) -> dict[str, tuple[DataFrame, str]]:
    """A pipeline's outputs as a user of plain PySpark runs them (the engine's own cost, issue
    40): the pipeline's own `build` over Spark's readers (`readStream.schema(S).json`, rows
    with the required fields present; a static input read as a table), default parameters,
    each output with its first mode. No slipstream parser, quarantine, event-time guard or
    late-row count. `options`: the stream readers' (maxFilesPerTrigger, ...)."""
    from slipstream.pipelines.registry import get_pipeline

    declared = get_pipeline(pipeline)
    frames: dict[str, DataFrame] = {}
    for spec in declared.inputs:
        reader: Any = spark.read if spec.static else spark.readStream.options(**(options or {}))
        if spec.schema is not None:
            reader = reader.schema(spec.schema)
        if spec.format == "csv":
            reader = reader.option("header", True)
        frame = reader.format(spec.format).load(str(paths[spec.name]))
        frames[spec.name] = frame.dropna(subset=list(spec.required)) if spec.required else frame
    params = declared.for_trigger(declared.parse_params({}), "available-now")
    built = declared.assemble(spark, frames, params)
    return {o.name: (built[o.name], o.modes[0]) for o in declared.outputs}


def start_bare(
    spark: SparkSession,
    pipeline: str,
    paths: Mapping[str, Path],
    scratch: Path,
    options: Mapping[str, str] | None = None,
) -> list[StreamingQuery]:
    """`bare_outputs` started to noop, available-now, one checkpoint each under `scratch`."""
    return [
        start_noop(frame, None, scratch / name, mode, available_now=True)
        for name, (frame, mode) in bare_outputs(spark, pipeline, paths, options).items()
    ]
