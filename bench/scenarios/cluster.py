"""13. Scaling out: `trending` on a Spark standalone cluster on this host vs local[*] (issue 15).

A master and one worker (2 cores, 2 GiB) start from the installed pyspark
(slipstream/tools/standalone.py), on the same cores as the driver: the figures say what the extra
processes (a driver JVM that runs no task, an executor JVM, RPC and task serialisation between
them) cost, not what more machines would give.

- **backfill**: `slipstream run trending --trigger available-now --max-files-per-trigger 1`
  over the same files; events/s = rows / time inside the results query's batches (Spark's own
  batch times, the first batch left out: JIT warm-up), and the wall time from launch to exit
  (start-up included).
- **live**: files of `rate` events land once a second (bench/live.py); latency from landing to
  the file's marker visible in SQLite, p50 and p95, the first files left out.
- **lost worker** (cluster only): live again; once the run is steady, the worker and its
  executor get SIGKILL while a batch is in progress (its offsets written, its commit not), and a
  new worker starts at once. Measured: how long until that batch commits, the worst latency of
  the files landed around the kill, and exactly-once (a marker counts one view, every marker
  is seen).

Variants alternate (local, cluster for the backfill; cluster, local for the live runs)."""

from __future__ import annotations

import time
from typing import Any

from bench.core import Context, Result, median
from bench.live import LiveRun, latency_summary
from bench.procs import Proc, slipstream_command
from bench.stage import param_args
from bench.workloads import generate_trending, land_all

NAME = "cluster"
TITLE = "scaling out: trending on a standalone cluster (1 worker, same 2 cores) vs local[*]"
IN_PROCESS = False
VARIANTS = ("local", "cluster")


def master_args(variant: str, cluster: Any, ctx: Context) -> tuple[str, ...]:
    if variant == "local":
        return ("--master", "local[*]", *param_args(ctx))
    return ("--master", cluster.url, *cluster.client_args(), *param_args(ctx))


def backfill(ctx: Context, variant: str, cluster: Any, events: int, rate: int) -> dict[str, Any]:
    work = ctx.scratch(f"backfill-{variant}")
    data = generate_trending(work / "input", events, float(rate), markers=False)
    land_all(data, work / "landing")
    proc = Proc(
        slipstream_command(
            "run", "trending", "--input", work / "landing", "--input", f"catalog={data.catalog}",
            "--state-dir", work / "state", "--sink", f"sqlite:{work / 'state' / 'trending.db'}",
            "--trigger", "available-now", "--max-files-per-trigger", "1",
            *master_args(variant, cluster, ctx),
        ),
        work / "run.log",
    )  # fmt: skip
    code = proc.wait(900)
    wall = time.monotonic() - proc.launched
    if code != 0:
        raise RuntimeError(f"{variant} backfill exited {code}: {proc.tail()}")
    lines = [b for b in proc.batch_lines("trending.views") if b.rows][1:]  # 0: JIT warm-up
    rows, busy = sum(b.rows for b in lines), sum(b.seconds for b in lines)
    return {
        "run": "backfill",
        "variant": variant,
        "events": data.total_lines,
        "batches": len(lines),
        "events_per_s": rows / busy if busy else float("nan"),
        "batch_s_p50": median([b.seconds for b in lines]),
        "wall_s": wall,
    }


def live(ctx: Context, variant: str, cluster: Any, rate: int, seconds: int) -> dict[str, Any]:
    run = LiveRun.prepare(
        ctx.scratch(f"live-{variant}"), rate, seconds, master_args(variant, cluster, ctx)
    )
    try:
        startup = run.start()
        began = run.pace()
        run.wait_paced(seconds + 60)
        drained = run.drain(120)
        spark = run.spark_rates(began, time.monotonic())
    finally:
        run.stop()
    lat = latency_summary(run.latencies(first=4))
    return {
        "run": f"live {rate:,}/s",
        "variant": variant,
        "startup_s": startup,
        "latency_p50_s": lat["p50_s"],
        "latency_p95_s": lat["p95_s"],
        "latency_max_s": lat["max_s"],
        "batch_s_p50": spark["batch_s_p50"],
        "busy": spark["busy_share"],
        "drained": drained,
    }


def lost_worker(ctx: Context, cluster: Any, rate: int, seconds: int, steady: int) -> dict:
    run = LiveRun.prepare(
        ctx.scratch("lost-worker"), rate, seconds, master_args("cluster", cluster, ctx)
    )
    views = run.state / "checkpoints" / "trending" / "views"

    def last(log: str) -> int:
        ids = [int(p.name) for p in (views / log).iterdir() if p.name.isdigit()]
        return max(ids, default=-1)

    try:
        run.start()
        run.pace()
        deadline = time.monotonic() + steady
        while time.monotonic() < deadline or last("offsets") <= last("commits"):
            if not run.alive():
                raise RuntimeError(run.failure("the run died before the kill"))
            time.sleep(0.02)  # bounded poll of the checkpoint: kill inside a batch
        batch = last("offsets")
        killed = time.monotonic()
        cluster.kill_worker()
        cluster.start_worker()
        registered = time.monotonic() - killed
        while last("commits") < batch:
            if not run.alive() or time.monotonic() - killed > 300:
                raise RuntimeError(run.failure(f"batch {batch} never committed after the kill"))
            time.sleep(0.05)
        committed = time.monotonic() - killed
        run.wait_paced(seconds + 120)
        drained = run.drain(180)
    finally:
        run.stop()
    around = {
        k: v
        for k, v in run.latencies(first=4).items()
        if killed - 5 <= run.pacer.landed[k] <= killed + 30
    }
    before = [v for k, v in run.latencies(first=4).items() if run.pacer.landed[k] < killed - 5]
    every = set(run.pacer.landed) <= set(run.poller.snapshot())
    return {
        "run": f"lost worker, live {rate:,}/s",
        "variant": "cluster",
        "killed_in_batch": batch,
        "new_worker_registered_s": registered,
        "lost_batch_committed_s": committed,
        "latency_p50_before_s": median(before),
        "latency_max_around_kill_s": max(around.values(), default=float("nan")),
        "drained": drained,
        "every_marker_seen": every,
        "max_views_of_a_marker": run.poller.max_views,
    }


def run(ctx: Context) -> Result:
    from slipstream.tools.standalone import StandaloneCluster

    result = Result(NAME, TITLE)
    events = ctx.param("events", 100_000, 1_000_000)
    file_rate = ctx.param("file_rate", 5_000, 20_000)  # events per file in the backfill
    rate = ctx.param("rate", 1_000, 5_000)
    seconds = ctx.param("seconds", 30, 60)
    steady = ctx.param("steady", 15, 30)
    result.params = {
        "worker": "1 worker, --cores 2 --memory 2g, master and worker on 127.0.0.1",
        "backfill_events": events,
        "backfill_events_per_file": file_rate,
        "live_rate_events_per_s": rate,
        "live_seconds": seconds,
        "steady_s_before_worker_kill": steady,
        "order": "backfill local, cluster; live cluster, local; lost worker",
    }
    with StandaloneCluster(ctx.scratch("cluster"), cores=2, memory="2g") as cluster:
        ctx.log(f"  cluster up: {cluster.url}")
        for variant in VARIANTS:
            row = backfill(ctx, variant, cluster, events, file_rate)
            ctx.log(f"  backfill {variant}: {row['events_per_s']:,.0f} events/s")
            result.add(**row)
        for variant in reversed(VARIANTS):
            row = live(ctx, variant, cluster, rate, seconds)
            ctx.log(f"  live {variant}: p50 {row['latency_p50_s']:.2f} s")
            result.add(**row)
        row = lost_worker(ctx, cluster, rate, seconds, steady)
        ctx.log(f"  lost worker: batch {row['killed_in_batch']} committed after "
                f"{row['lost_batch_committed_s']:.1f} s")  # fmt: skip
        result.add(**row)
    by = {(r["run"], r["variant"]): r for r in result.rows}
    back = by[("backfill", "cluster")]["events_per_s"] / by[("backfill", "local")]["events_per_s"]
    result.headline["backfill events/s, cluster / local[*]"] = f"{back:.2f}"
    live_run = f"live {rate:,}/s"
    for q in ("p50", "p95"):
        c, loc = by[(live_run, "cluster")], by[(live_run, "local")]
        result.headline[f"live latency {q}, cluster / local[*]"] = (
            f"{c[f'latency_{q}_s'] / loc[f'latency_{q}_s']:.2f} "
            f"({c[f'latency_{q}_s']:.2f} s vs {loc[f'latency_{q}_s']:.2f} s)"
        )
    lost = result.rows[-1]
    result.headline["lost worker: lost batch committed after (s)"] = (
        f"{lost['lost_batch_committed_s']:.1f}"
    )
    result.headline["lost worker: exactly-once (every marker seen, max views 1)"] = (
        f"{lost['every_marker_seen']}, {lost['max_views_of_a_marker']}"
    )
    if not (lost["every_marker_seen"] and lost["max_views_of_a_marker"] == 1):
        result.failed = "the run lost or doubled a marker after the worker was killed"
    result.notes.append(
        "the worker shares the 2 cores with the driver: these are costs of the extra processes, "
        "not a speed-up; the machine was shared with other work (load in the JSON)"
    )
    return result
