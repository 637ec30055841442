"""How many shuffle partitions (and so state stores per stateful operator) a run's queries get,
and which state store (issue 40 item 2): batches sized for what they carry.

Every stateful operator keeps one state store per shuffle partition and commits each one every
batch, so a batch's fixed cost grows with the partitions while its useful work grows with its
rows. Spark fixes the number into a query's checkpoint at its first batch and restores it on
every restart, whatever the session says; so it is chosen when a checkpoint is made:

- `--conf spark.sql.shuffle.partitions=N`: the user's N.
- Checkpoints that already hold a number (all the same): that number, so an output added
  later matches the others and `check` says what the state really has.
- A new run on a local master: a live trigger (default, an interval, real-time, continuous)
  carries small batches, so 1 (one state store per operator; issue 40 measured the state
  commits of 1,000-event batches at 0.24x those of 4 partitions, and real-time mode holds a slot
  per partition); a finite trigger (available-now, once) is a backfill of large batches, so one
  per core. So is a live run that deduplicates by timers (`--dedup timers`): its processor
  works about 30-40 us an id it adds or expires, the largest part of its batch, and with one
  partition that is one task on one core while the others wait (live `trending` at 10,000
  events/s, its state full: p50 2.27 s with two partitions on 2 cores, 3.8-4.2 s with one;
  docs/benchmarks.md section 46).
- A cluster, spark-submit's master or Spark Connect: Spark's session default of slipstream
  (settings/session.py: 2 x cores), as the cluster's size is not known here.

A pipeline moves to another number with `--from-checkpoint OLD` and a new `--state-dir`: the
new checkpoints are made by the new run's rule.

The state store is chosen the same way (Spark fixes its provider into a checkpoint too): the
user's (`--conf spark.sql.streaming.stateStore.providerClass=...`), else the checkpoints' own,
else, for a new micro-batch run on a local master, Spark's own HDFS-backed store (the state in
the driver's heap) when the state is sure to fit there:

- a live trigger (default, an interval): small batches, each committing a delta file; its
  batches took 0.82-0.83 s against RocksDB's 0.93-1.03 s in live `trending` at 1,000 events/s
  (docs/benchmarks.md section 36);
- a finite trigger (available-now, once) whose inputs hold at most 1/BACKLOG_SHARE_OF_HEAP of
  the driver's heap (`spark.driver.memory`: a quarter of RAM by default, spark-submit's
  own under spark-submit), as their sources
  measure them before Spark starts (files: the folder's bytes). A backfill's state holds about
  a key per record it keeps (trending's deduplication: one per event, of the order of the
  record's raw bytes in the heap), and Spark's store keeps two versions of the map. Over a
  1,000,000-event `trending` backfill (103 MiB), slipstream on Spark's store used 1.10x the
  CPU of the bare query, on RocksDB 1.36x (docs/benchmarks.md section 37). A backfill larger
  than that share, or of a size its source cannot tell (a topic), gets RocksDB.

A query with arbitrary state keeps RocksDB, which transformWithState needs (`store_settings`,
set while it starts). Otherwise (real-time mode, a cluster, Spark Connect) RocksDB with
changelog checkpointing (settings/session.py): its state lives off the JVM's heap. A run whose
state outgrows the driver's heap is started with `--conf
spark.sql.streaming.stateStore.providerClass=` and RocksDB's class (`ROCKSDB_STORE`), or moved
to it with `--from-checkpoint`.

The state's row count is chosen per run, not per checkpoint. To count the rows it holds, Spark's
RocksDB store reads every key before it writes it; a backfill writes a key for most records it
reads (trending's deduplication: one per event), and that read cost it 1.07-1.28x the CPU of
the same query without it (docs/benchmarks.md section 31). So a finite run does not count them
(`spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows=false`, set while each of its
queries starts, not left in the session; its batch lines say "state -", not a false 0), and a
live run, whose state is what an operator watches, does. Spark counts the keys again when a run
that counts loads a version written without the count, so a checkpoint moves freely between
the two; `--conf ...trackTotalNumberOfRows=true` counts in a finite run too. A query that
deduplicates by timers never counts: the ids it holds are its timers, which Spark's store keeps
outside the rows it counts (its operator says 0 rows), so the count would be a read before
every timer written or deleted for a 0 (docs/benchmarks.md section 47); its lines say
"state -", and `slipstream state` counts its timers.

Batches of no data are chosen per query too. When a batch moves the watermark, Spark runs another
batch without new data to evict the state the new watermark expires and to emit what it closes.
A live micro-batch query whose output is upserted (update or complete mode: the batch emits
nothing) and that keeps no arbitrary state (no timers) skips it: its state is evicted by the
next data batch instead, with the same watermark, and on a live run that batch no longer waits
behind it (docs/benchmarks.md section 40: live `trending` at 1,000 events/s, p50 0.80-0.91 s
against 1.24 s). Append outputs keep it (it emits the windows the watermark closes, whether
more data comes or not), as do queries with timers, finite runs (their last batch) and
real-time mode; `--conf spark.sql.streaming.noDataMicroBatches.enabled=...` chooses for every
query.

A live run's file reads are split across the cores. Spark packs a batch's files into read tasks
counting each file as `spark.sql.files.openCostInBytes` (4 MiB) more than its size, and cuts a
file only into pieces of at least that size (its last aside): a live batch of one file (1 MB
at 10,000 events/s) is one task, parsed on one core while the other waits. A micro-batch run
with a live trigger on a local master counts a file's opening as OPEN_COST_BYTES, so a batch's
bytes are spread over the cores (two tasks for one 100 KB file on 2 cores): live `trending` at
10,000 events/s, p50 0.69x and 0.92x, p99 0.71x and 0.84x in two pairs; at 1,000 events/s p50
1.00x, p99 0.80x (docs/benchmarks.md section 42). Spark reads it from the session, not from a
query's own settings, so it is in the run's session conf (`Choice.conf`); `--conf
spark.sql.files.openCostInBytes=...` chooses instead."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from slipstream.analysis.plan import Plan
from slipstream.checkpoint.logs import PARTITIONS, recorded_conf, recorded_partitions
from slipstream.runtime.bound import Prepared
from slipstream.settings.config import Settings
from slipstream.settings.driver_memory import size_mib
from slipstream.settings.session import (
    DEFAULT_MASTER,
    STATE_PROVIDER,
    cores_of,
    driver_memory,
    is_local,
    submitted_master,
)

FINITE = ("available-now", "once")
LIVE_MICRO_BATCH = ("default", "interval")
#: Spark's own state store, in the JVM's heap (a live run's on a local master)
HDFS_STORE = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: a backfill whose input is within this share of the driver's heap keeps its state in the heap
BACKLOG_SHARE_OF_HEAP = 8
#: whether RocksDB state stores count their rows (a finite run does not: the module's text)
STATE_ROWS_COUNTED = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
#: whether a query runs a batch of no data when its watermark moves (the module's text)
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
#: what Spark counts a file's opening as when it packs files into read tasks (the module's text)
OPEN_COST = "spark.sql.files.openCostInBytes"
#: a live run's: small beside a live batch's bytes, so that one file is split across the cores
OPEN_COST_BYTES = 8192


@dataclass(frozen=True)
class Choice:
    count: int | None  # None: the session's default stands
    why: str
    count_rows: bool = True  # whether the state stores count the rows they hold
    store: str | None = None  # the state store's provider; None: the session's (RocksDB)
    store_why: str = ""
    no_data: str = ""  # how the run's queries take Spark's batches of no data, when it differs
    open_cost: int | None = None  # a file's opening in bytes of reading; None: the session's
    timers: bool = False  # a query deduplicates by timers: its state rows are not counted

    def conf(self) -> dict[str, str]:
        """The session's settings for the run (the row count and the state store are set per
        query while it starts: row_settings, store_settings)."""
        conf = {} if self.count is None else {PARTITIONS: str(self.count)}
        if self.open_cost is not None:
            conf[OPEN_COST] = str(self.open_cost)
        return conf

    def describe(self) -> str:
        shown = "the session's default" if self.count is None else str(self.count)
        rows = (
            ""
            if self.count_rows
            else "; state rows not counted in a finite run (a read before every state write; "
            f"--conf {STATE_ROWS_COUNTED}=true counts them)"
        )
        store = "the session's (RocksDB)" if self.store is None else self.store.rsplit(".", 1)[-1]
        lines = [
            f"state partitions {shown}: {self.why}{rows}",
            f"state store {store}: {self.store_why}",
        ]
        if self.no_data:
            lines.append(f"batches of no data: {self.no_data}")
        if self.timers:
            lines.append(
                "state rows of a query deduplicating by timers: not counted (the ids it holds are "
                "its timers, which Spark's store does not count; `slipstream state` counts them)"
            )
        if self.open_cost is not None:
            lines.append(
                f"file reads: a file's opening counted as {self.open_cost:,} bytes (Spark: 4 MiB), "
                f"so a live batch's bytes are split across the cores (--conf {OPEN_COST}=... "
                "chooses)"
            )
        return "\n".join(lines)


def row_settings(settings: Settings) -> dict[str, str]:
    """The settings a run's queries start with for the state's row count: not counted in a
    finite run unless `--conf` says otherwise (the module's text)."""
    given = settings.conf.get(STATE_ROWS_COUNTED)
    counted = not settings.trigger.finite if given is None else given.strip().lower() != "false"
    return {} if counted else {STATE_ROWS_COUNTED: "false"}


def counts_state_rows(spark: SparkSession, prepared: Prepared) -> bool:
    """Whether the run's state stores count the rows they hold (only RocksDB can not)."""
    provider = _store(prepared)[0] or spark.conf.get(STATE_PROVIDER, "") or ""
    return "RocksDB" not in provider or not row_settings(prepared.settings)


def choose(prepared: Prepared) -> Choice:
    """The shuffle partitions for the checkpoints this run makes, and whether its state stores
    count their rows (see the module's text)."""
    store, store_why = _store(prepared)
    # only RocksDB can leave them uncounted: Spark's own store always counts
    count_rows = not row_settings(prepared.settings) or "RocksDB" not in (store or ROCKSDB_STORE)
    no_data = ""
    if _skips_no_data(prepared.settings):
        no_data = (
            "skipped by a live run's update and complete outputs (the next data batch evicts "
            f"the state; --conf {NO_DATA_BATCHES}=true runs them); append outputs and timers "
            "keep them"
        )
    chosen = _partitions(prepared)
    return replace(
        chosen,
        count_rows=count_rows,
        store=store,
        store_why=store_why,
        no_data=no_data,
        open_cost=_open_cost(prepared.settings),
        timers=prepared.params.get("dedup") == "timers",
    )


def _open_cost(settings: Settings) -> int | None:
    """A live micro-batch run on a local master: OPEN_COST_BYTES, unless `--conf` sets it
    (the module's text)."""
    live = settings.trigger.kind in LIVE_MICRO_BATCH
    local = _local_master(settings) is not None
    return OPEN_COST_BYTES if local and live and OPEN_COST not in settings.conf else None


def _local_master(settings: Settings) -> str | None:
    """The run's master when it is a local one (not a cluster, not Spark Connect), else None."""
    master = settings.master or submitted_master() or DEFAULT_MASTER
    return master if settings.remote is None and is_local(master) else None


def query_settings(
    spark: SparkSession, prepared: Prepared, plan: Plan, mode: str
) -> dict[str, str]:
    """A query's own settings while it starts: its state store (store_settings), its row
    count, off only where the run's stores leave rows uncounted (counts_state_rows, which the
    batch lines follow): a query given RocksDB under a run on Spark's own store (arbitrary
    state) counts, or its lines would show a false 0, and a deduplication by timers never does
    (the module's text); and its batches of no data (the module's text): `--conf`'s for every
    query, else off for an upserted output of a live run that keeps no timers."""
    rows = {} if counts_state_rows(spark, prepared) else row_settings(prepared.settings)
    if plan.dedup_timers:  # its rows are its timers, which Spark's stores do not count
        rows = {STATE_ROWS_COUNTED: "false"}
    given = prepared.settings.conf.get(NO_DATA_BATCHES)
    no_data = {} if given is None else {NO_DATA_BATCHES: given}  # a caller's session too
    timers = plan.arbitrary_state and not plan.dedup_timers  # a processor's own timers
    if _skips_no_data(prepared.settings) and mode != "append" and not timers:
        no_data = {NO_DATA_BATCHES: "false"}
    return {**rows, **no_data, **store_settings(prepared, plan)}


def _skips_no_data(settings: Settings) -> bool:
    """Whether the run's upserted outputs skip Spark's batches of no data: a live micro-batch
    run, unless `--conf` chooses (the module's text)."""
    return settings.trigger.kind in LIVE_MICRO_BATCH and NO_DATA_BATCHES not in settings.conf


def store_settings(prepared: Prepared, plan: Plan) -> dict[str, str]:
    """A query's state store, set while it starts (not in the session, which a caller may
    share): the run's choice, but RocksDB for arbitrary state under a live run's HDFS-backed
    store (transformWithState needs it); nothing when the session's stands."""
    store = _store(prepared)[0]
    if store == HDFS_STORE and plan.arbitrary_state:
        return {STATE_PROVIDER: ROCKSDB_STORE}
    return {} if store is None else {STATE_PROVIDER: store}


def state_in_heap(prepared: Prepared) -> bool:
    """Whether the run's state is in the driver's heap: Spark's own store on a local master."""
    return _store(prepared)[0] == HDFS_STORE and _local_master(prepared.settings) is not None


def _store(prepared: Prepared) -> tuple[str | None, str]:
    """The state store's provider for the checkpoints this run makes (the module's text)."""
    s = prepared.settings
    given = s.conf.get(STATE_PROVIDER)
    if given:
        return given, "set with --conf"
    recorded = {recorded_conf(o.ctx.checkpoint, STATE_PROVIDER) for o in prepared.outputs.values()}
    recorded.discard(None)
    if len(recorded) == 1:
        return recorded.pop(), "the checkpoints' own (Spark fixes it at a first batch)"
    if _local_master(s) is None:
        return None, "state off the JVM's heap, for a cluster's"
    if s.trigger.kind in LIVE_MICRO_BATCH:
        return HDFS_STORE, (
            "a live run's small batches, Spark's own store in the JVM's heap (RocksDB for a "
            "query with arbitrary state: transformWithState needs it)"
        )
    if s.trigger.kind in FINITE:
        return _backfill_store(prepared)
    return None, "state off the JVM's heap, for real-time mode's"


def _backfill_store(prepared: Prepared) -> tuple[str | None, str]:
    """A finite run's store on a local master: Spark's own when what it reads is small beside
    the driver's heap, else RocksDB (the module's text)."""
    sizes = [
        b.source.backlog_bytes(b.binding, b.source.given(b.source_options))
        for b in prepared.inputs.values()
        if b.source is not None
    ]
    heap = size_mib(driver_memory(prepared.settings.conf))
    if not sizes or None in sizes or heap is None:
        return None, "a backfill of a size not known before it starts: state off the JVM's heap"
    backlog = sum(s for s in sizes if s is not None) / 2**20
    if backlog <= heap / BACKLOG_SHARE_OF_HEAP:
        return HDFS_STORE, (
            f"a backfill of {backlog:,.0f} MiB, within 1/{BACKLOG_SHARE_OF_HEAP} of the driver's "
            f"{heap:,.0f} MiB heap: Spark's own store in the heap (RocksDB for a query with "
            "arbitrary state)"
        )
    return None, (
        f"a backfill of {backlog:,.0f} MiB, over 1/{BACKLOG_SHARE_OF_HEAP} of the driver's "
        f"{heap:,.0f} MiB heap: state off the JVM's heap"
    )


def _partitions(prepared: Prepared) -> Choice:
    s = prepared.settings
    given = s.conf.get(PARTITIONS)
    if given is not None:
        return Choice(int(given) if given.strip().isdigit() else None, "set with --conf")
    recorded = {recorded_partitions(o.ctx.checkpoint) for o in prepared.outputs.values()}
    recorded.discard(None)
    if len(recorded) == 1:
        return Choice(recorded.pop(), "the checkpoints' own (Spark fixes it at a first batch)")
    master = _local_master(s)
    if master is None:
        return Choice(None, "a cluster's (2 x its cores when slipstream builds the session)")
    cores = max(1, cores_of(master) or os.cpu_count() or 1)
    if s.trigger.kind in FINITE:
        return Choice(cores, "a backfill's large batches, one partition per core")
    if prepared.params.get("dedup") == "timers":
        return Choice(cores, (
            "a live run deduplicating by timers, one partition per core: the processor's work "
            "per id is its batch's largest cost"
        ))  # fmt: skip
    return Choice(1, "a live run's small batches, one state store per stateful operator")
