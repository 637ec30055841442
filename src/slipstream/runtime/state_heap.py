"""A warning before the state fills the driver's heap.

A live micro-batch run on a local master keeps its state in Spark's own store, in the driver's
heap (runtime/partitions.py), and a live run's state grows with its input rate times its
watermark: `trending` at 10,000 events/s held 9.1 million ids and 2.8 GiB of heap after 16
minutes (docs/benchmarks.md section 44). Nothing bounds it before the run starts, and a heap
that fills ends the run, which then fails again loading the same state. `StateHeapWatch`, a
listener handler, adds up the memory each query's state stores report (Spark's
`memoryUsedBytes`) and, once it passes WARN_SHARE of the heap, logs once what to do: move the
pipeline's state off the heap with `--from-checkpoint` onto RocksDB, or give the driver more
memory; a pipeline that deduplicates within the watermark is pointed at `--dedup timers`,
which keeps the same rows on RocksDB at a batch cost that does not grow with the ids held."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession

from slipstream.runtime.bound import Prepared
from slipstream.runtime.partitions import ROCKSDB_STORE, state_in_heap
from slipstream.settings.connect import is_connect
from slipstream.settings.session import STATE_PROVIDER

log = logging.getLogger(__name__)

#: the share of the driver's maximum heap the state may hold before the run warns
WARN_SHARE = 0.5
MIB = 1024 * 1024


class StateHeapWatch:
    """A listener handler: warns once when the run's state passes WARN_SHARE of `heap_bytes`."""

    def __init__(
        self, pipeline: str, checkpoint: str, heap_bytes: int, dedup: str | None = None
    ) -> None:
        self.pipeline = pipeline
        self.checkpoint = checkpoint
        self.heap_bytes = heap_bytes
        self.dedup = dedup  # the pipeline's `--dedup` form, if it has one
        self.by_query: dict[str, int] = {}
        self.warned = False

    @classmethod
    def for_run(cls, spark: SparkSession, prepared: Prepared) -> StateHeapWatch | None:
        """The watch of a run whose state is in the driver's heap, else None."""
        if is_connect(spark) or not state_in_heap(prepared):
            return None
        jvm: Any = spark.sparkContext._jvm
        heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
        settings = prepared.settings
        dedup = prepared.params.get("dedup")
        return cls(prepared.pipeline.name, str(settings.checkpoint_root), heap, dedup)

    def __call__(self, record: dict[str, Any]) -> None:
        if record.get("event") != "progress" or self.warned:
            return
        operators = record["progress"].get("stateOperators") or []
        used = sum(int(op.get("memoryUsedBytes") or 0) for op in operators)
        self.by_query[str(record.get("query", ""))] = used
        total = sum(self.by_query.values())
        if total <= WARN_SHARE * self.heap_bytes:
            return
        self.warned = True
        log.warning(
            "the state of %s holds %d MiB of the driver's heap (%d%% of %d MiB) and a live "
            "run's state grows with its input rate times its watermark: move it off the heap "
            "before the heap fills, `slipstream run %s --from-checkpoint %s --state-dir NEW "
            "%s`, or give the driver more memory (`--conf spark.driver.memory=...`)",
            ", ".join(sorted(self.by_query)), total // MIB,
            round(100 * total / self.heap_bytes), self.heap_bytes // MIB,
            self.pipeline, self.checkpoint, self._off_heap(),
        )  # fmt: skip

    def _off_heap(self) -> str:
        """The flags that move the state onto RocksDB: a deduplication within the watermark
        moves to its form by timers, whose batches do not grow with the ids held (it keeps the
        same rows; docs/benchmarks.md section 45)."""
        if self.dedup == "within-watermark":
            return "--dedup timers"
        return f"--conf {STATE_PROVIDER}={ROCKSDB_STORE}"
