"""A Delta Lake table in a folder (`--sink delta:DIR`, `delta:DIR` per output in TOML), written
in `foreachBatch` with Delta's own idempotent writes: every commit carries `txnAppId` (Spark's
query id, stable across restarts of the checkpoint) and `txnVersion` (the batch id), and Delta
skips a commit whose version it already holds for that application. A batch replayed after a
crash between Delta's commit and the checkpoint's is written once.

- append: the batch's rows are appended;
- complete: the table is overwritten with the batch (the whole result), same transaction options;
- update: the batch is MERGEd into the table on the output's key (a row updated or inserted),
  with the transaction options as Delta's session settings (`spark.databricks.delta.write.*`);
  the first batch creates the table.

The table is created with the output's schema, partitioned by `partitionBy=COLUMN[,...]`. Delta
runs on the Spark 4.2 line only (`pip install 'slipstream[delta]'`): on another line the sink
is refused with DELTA_UNAVAILABLE when it is declared, before the JVM starts
(core/spark_line.py). Its session gets Delta's jar, SQL extension and catalog
(settings/delta_package.py). `reset --outputs` deletes the folder only when slipstream's mark
is in it, as for the file sinks."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from slipstream.checkpoint.lifecycle import not_ours
from slipstream.core import spark_line
from slipstream.core.delta_log import has_commit
from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.sinks.base import BatchInfo, BatchSink, SinkContext, drain, fault_point
from slipstream.sinks.spark_sinks import (
    OUTPUT_MARK,
    partition_columns,
    refuse_unknown_partitions,
    write_mark,
)

log = logging.getLogger("slipstream.sinks")

#: Delta's session settings that make a MERGE idempotent (its DataFrame writer's options are
#: `txnAppId` and `txnVersion`)
TXN_APP = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


class DeltaSink(BatchSink):
    kind = "delta"
    target_grammar = "required"
    usage = "delta:DIR"
    local_path = True
    delta = True
    writer_options = ("partitionBy",)

    def __init__(self, spec: SinkSpec) -> None:
        spark_line.require_delta()
        super().__init__(spec)

    @property
    def directory(self) -> Path:
        return self.spec.path()

    @property
    def partition_columns(self) -> list[str]:
        return partition_columns(self.spec)

    def shape(self, frame: DataFrame, ctx: SinkContext) -> DataFrame:
        refuse_unknown_partitions(self.spec, frame, ctx)
        if ctx.mode == "update" and not ctx.key:
            raise ConfigError(
                "SINK_NEEDS_KEY",
                f"update mode into the Delta table {self.directory} merges on the output's key, "
                f"and output {ctx.table} declares none",
                "use --mode append or complete, or declare the output's key",
            )
        return frame

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        write_mark(self.directory, ctx.checkpoint)
        return super().attach(writer, ctx)

    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        path = str(self.directory.resolve())
        held = committed_batch(self.directory, info.query_id)
        if held is not None and info.batch_id <= held:
            # a replay Delta would skip without running the batch's plan: its stateful
            # operators must still commit their state stores (base.drain)
            log.info("batch %s of %s is in the Delta table: a replay, not written again",
                     info.batch_id, info.ctx.query_name)  # fmt: skip
            drain(batch)
            self.skipped_batches += 1
            return
        if info.ctx.mode == "update" and self.exists():
            self._merge(batch, info, path)
            return
        writer = (
            batch.write.format("delta")
            .mode("overwrite" if info.ctx.mode == "complete" else "append")
            .option("txnAppId", info.query_id)
            .option("txnVersion", str(info.batch_id))
        )
        if self.partition_columns:
            writer = writer.partitionBy(*self.partition_columns)
        fault_point("before-commit", info.batch_id)
        writer.save(path)

    def _merge(self, batch: DataFrame, info: BatchInfo, path: str) -> None:
        spark = batch.sparkSession
        view = re.sub(r"\W", "_", f"slipstream_delta_{info.ctx.query_name}_{info.batch_id}")
        batch.createOrReplaceTempView(view)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in info.ctx.key)
        spark.conf.set(TXN_APP, info.query_id)
        spark.conf.set(TXN_VERSION, str(info.batch_id))
        try:
            fault_point("before-commit", info.batch_id)
            spark.sql(
                f"MERGE INTO delta.`{path}` AS t USING {view} AS s ON {on} "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
        finally:
            spark.conf.unset(TXN_APP)
            spark.conf.unset(TXN_VERSION)
            spark.catalog.dropTempView(view)

    def exists(self) -> bool:
        return has_commit(self.directory)

    def describe(self, ctx: SinkContext | None = None) -> str:
        return f"Delta table in {self.directory} (exactly-once: Delta's txnAppId/txnVersion)"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        return spark.read.format("delta").load(str(self.directory)) if self.exists() else None

    def location(self, ctx: SinkContext) -> str | None:
        return f"delta:{self.directory.resolve()}"

    def owns(self, ctx: SinkContext) -> bool:
        folder = self.directory
        if not folder.exists():
            return True
        return folder.is_dir() and (not any(folder.iterdir()) or (folder / OUTPUT_MARK).is_file())

    def reset(self, ctx: SinkContext) -> list[str]:
        """Delete the table's folder, if slipstream's mark is in it."""
        folder = self.directory
        if not folder.exists():
            return []
        if not self.owns(ctx):
            raise not_ours(folder, f"Delta table of {ctx.query_name}")
        shutil.rmtree(folder)
        return [str(folder)]


def append_once(frame: DataFrame, table: Path, app_id: str, batch_id: int) -> bool:
    """Append `frame` to the Delta table in `table` as batch `batch_id` of the writer `app_id`
    (`txnAppId`/`txnVersion`), unless the table holds that batch already (a replay); whether it
    wrote. The quarantine of a staged input and the late-row dead-letter write so."""
    held = committed_batch(table, app_id)
    if held is not None and batch_id <= held:
        return False
    frame.write.format("delta").mode("append").option("txnAppId", app_id).option(
        "txnVersion", str(batch_id)
    ).save(str(table.resolve()))
    return True


def committed_batch(table: Path, app_id: str) -> int | None:
    """The last `txnVersion` (batch id) Delta holds for the application `app_id` in `table`'s
    log; None when it holds none. Read the way Delta does: the commits' JSON newest first (a
    query's own last commit is usually the newest), then the last checkpoint's Parquet (with
    pyarrow) for a table whose older commits were cleaned up."""
    log_dir = table / "_delta_log"
    if not log_dir.is_dir():
        return None
    commits = sorted(log_dir.glob("[0-9]*.json"), reverse=True)
    for commit in commits:
        for line in commit.read_text().splitlines():
            txn = json.loads(line).get("txn") if line.strip() else None
            if txn and txn.get("appId") == app_id:
                return int(txn["version"])
    return _checkpoint_txn(log_dir, app_id)


def _checkpoint_txn(log_dir: Path, app_id: str) -> int | None:
    parts = sorted(log_dir.glob("[0-9]*.checkpoint*.parquet"))
    if not parts:
        return None
    import pyarrow.parquet as pq

    newest = parts[-1].name.split(".")[0]
    for part in (p for p in parts if p.name.startswith(newest)):
        rows = pq.read_table(part, columns=["txn"]).column("txn").to_pylist()
        for txn in rows:
            if txn and txn.get("appId") == app_id:
                return int(txn["version"])
    return None
