"""1. Engine ceiling: rate-micro-batch -> event-time window count with watermark -> noop.

What the engine does on this machine with no slipstream code in the path: the reference every
other throughput figure is compared with. Two tables:

- state stores (HDFS-backed default, RocksDB, RocksDB + changelog checkpointing) at slipstream's
  default shuffle partitions, with large batches (throughput);
- shuffle partitions (2, 4, 8, ...) with the default store, with small batches (the per-batch
  cost a live query pays every trigger) and, in the full run, large ones.

Rows/s are Spark's own per-batch figures (rows / triggerExecution time) over the measured
batches, after warm-up batches that pay for planning and state set-up."""

from __future__ import annotations

from typing import Any

from bench import inproc
from bench.core import Context, Result, alternate, median, paired_ratios, summarize_ratio

NAME = "ceiling"
TITLE = "engine ceiling: rate-micro-batch -> window count + watermark -> noop"


def measure(
    ctx: Context, label: str, conf: dict[str, str], rows_per_batch: int, warmup: int, batches: int
) -> dict[str, Any]:
    spark = inproc.session()
    checkpoint = ctx.scratch("ceiling") / f"{label}-{id(conf)}-{inproc.unique()}"
    with inproc.sql_conf(spark, conf):
        frame = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows_per_batch)
            .option("advanceMillisPerBatch", 1000)
            .load()
        )
        query = inproc.start_noop(
            inproc.windowed_count(frame), f"bench-ceiling-{label}", checkpoint
        )
    return inproc.run_batches(query, warmup, batches)


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    big = ctx.param("rows_per_batch", 200_000, 1_000_000)
    small = 10_000
    batches = ctx.param("batches", 4, 8)
    warmup = 2
    reps = ctx.param("reps", 1, 2)
    default_partitions = inproc.session().conf.get(inproc.PARTITIONS_KEY)
    result.params = {
        "rows_per_batch_large": big,
        "rows_per_batch_small": small,
        "measured_batches": batches,
        "warmup_batches": warmup,
        "repetitions": reps,
        "keys": 100,
        "window": "10 seconds tumbling, watermark 10 seconds",
        "default_shuffle_partitions": default_partitions,
    }
    ctx.log("  JVM warm-up query")
    measure(ctx, "jvm-warmup", {}, big, 1, 2)

    stores = list(inproc.STATE_STORES)

    def one_store(name: str, rep: int) -> dict[str, Any]:
        return measure(ctx, name, inproc.STATE_STORES[name], big, warmup, batches)

    runs = alternate(stores, one_store, reps, warmup=False, log=ctx.log)
    for name in stores:
        mine = [r for r in runs if r["variant"] == name]
        result.add(
            table="state store",
            variant=name,
            partitions=int(default_partitions),
            rows_per_batch=big,
            rows_per_s=median([r["rows_per_s"] for r in mine]),
            ms_per_batch=median([r["ms_per_batch"] for r in mine]),
            runs=len(mine),
        )
    for name in ("hdfs", "rocksdb"):
        result.headline[f"rows/s rocksdb+changelog vs {name}"] = summarize_ratio(
            paired_ratios(runs, "rows_per_s", "rocksdb+changelog", name)
        )
    result.headline["engine ceiling rows/s (default store)"] = median(
        [r["rows_per_s"] for r in runs if r["variant"] == "rocksdb+changelog"]
    )

    partitions = ctx.param("partitions", [2, 4, 8], [2, 4, 8, 16, 200])
    sizes = ctx.param("partition_batch_sizes", [small], [small, big])
    default_store = inproc.STATE_STORES["rocksdb+changelog"]
    for size in sizes:

        def one_partitioning(name: str, rep: int, size: int = size) -> dict[str, Any]:
            conf = {**default_store, inproc.PARTITIONS_KEY: name}
            many = int(name) > 16
            return measure(
                ctx, f"p{name}", conf, size, warmup, max(2, batches // 2) if many else batches
            )

        names = [str(p) for p in partitions]
        runs = alternate(names, one_partitioning, reps, warmup=False, log=ctx.log)
        for name in names:
            mine = [r for r in runs if r["variant"] == name]
            result.add(
                table="shuffle partitions",
                variant="rocksdb+changelog",
                partitions=int(name),
                rows_per_batch=size,
                rows_per_s=median([r["rows_per_s"] for r in mine]),
                ms_per_batch=median([r["ms_per_batch"] for r in mine]),
                runs=len(mine),
            )
        for name in names:
            if name != default_partitions:
                result.headline[
                    f"ms/batch at {size:,} rows: {name} vs {default_partitions} partitions"
                ] = summarize_ratio(paired_ratios(runs, "ms_per_batch", name, default_partitions))
    result.notes.append(
        "rows/s = rows / Spark's triggerExecution time over the measured batches; ratios are "
        "paired within one repetition (same minute, same load), median (min-max)"
    )
    return result
