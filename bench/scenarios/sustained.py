"""4. Sustained rate and end-to-end latency of `trending` with the default trigger.

For each input rate, files of `rate` events land in the landing folder once a second (event
time advances one second per file, like a live feed) while `slipstream run trending --input
DIR --catalog FILE` runs in a subprocess with its defaults (default trigger, SQLite sink).

- **keeps up?** Every landed file's counts become visible before the drain deadline, Spark's
  own processing rate (rows / time inside the results query's batches, from pacing start to the
  end of the drain) is at least the input rate (headroom >= 1), and the latency of the last
  third of the files is not drifting up (p50 at most 1.5 x the first third's + 1 s). `busy` is
  the share of wall time the results query spent inside batches.
- **latency**: from the moment a file is renamed into the landing folder to the moment a row of
  its marker article is visible in `article_views` (polled every 50 ms, so latencies are
  over-stated by about 25 ms). The first files after start-up are left out (JIT warm-up).
"""

from __future__ import annotations

import time
from typing import Any

from bench.core import Context, Result
from bench.live import LiveRun, latency_summary
from bench.procs import trending_unavailable

NAME = "sustained"
TITLE = "sustained rate and latency: trending, default trigger, files landing every second"
IN_PROCESS = False


def one_rate(
    ctx: Context, rate: int, seconds: int, settle: int, drain: int, trigger: str = "default"
) -> dict[str, Any]:
    label = f"{rate:,} events/s, trigger {trigger}"
    ctx.log(f"  {label}: generating {seconds + 1} files")
    extra = () if trigger == "default" else ("--trigger", trigger)
    live = LiveRun.prepare(ctx.scratch(f"rate-{rate}-{trigger}"), rate, seconds, extra)
    try:
        startup = live.start()
        ctx.log(f"  {label}: first file visible after {startup:.1f} s; pacing")
        assert live.proc is not None
        began = live.pace()
        cpu_began = live.proc.cpu_seconds()
        live.wait_paced(seconds + 60)
        ended = time.monotonic()
        cpu = (live.proc.cpu_seconds() - cpu_began) / (ended - began)
        backlog_end = live.backlog(ended)
        drained = live.drain(drain)
        spark = live.spark_rates(began, time.monotonic())
    finally:
        live.stop()
    lat = latency_summary(live.latencies(first=1 + settle))
    input_rate = live.events_landed(began, ended) / (ended - began)
    headroom = spark["processing_rows_per_s"] / input_rate if input_rate else float("nan")
    keeps_up = (
        drained
        and headroom >= 1.0
        and lat["last_third_p50_s"] <= 1.5 * lat["first_third_p50_s"] + 1.0
    )
    ctx.log(
        f"  {label}: p50 {lat['p50_s']:.2f} s, p99 {lat['p99_s']:.2f} s, "
        f"backlog {backlog_end} files, keeps up: {keeps_up}"
    )
    return {
        "rate": rate,
        "trigger": trigger,
        "input_events_per_s": input_rate,
        "cpu_cores": cpu,
        "spark_rows_per_s": spark["processing_rows_per_s"],
        "headroom": headroom,
        "busy": spark["busy_share"],
        "batches": spark["batches"],
        "batch_s_p50": spark["batch_s_p50"],
        "latency_p50_s": lat["p50_s"],
        "latency_p95_s": lat["p95_s"],
        "latency_p99_s": lat["p99_s"],
        "latency_max_s": lat["max_s"],
        "drift": f"{lat['first_third_p50_s']:.2f} -> {lat['last_third_p50_s']:.2f}",
        "backlog_files_at_end": backlog_end,
        "keeps_up": keeps_up,
        "startup_s": startup,
        "files_measured": lat["files"],
    }


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    reason = trending_unavailable()
    if reason:
        result.skipped = reason
        return result
    rates = ctx.size([1_000, 10_000], [1_000, 10_000, 50_000])
    seconds = ctx.size(20, 60)
    settle = ctx.size(3, 5)
    drain = ctx.size(30, 90)
    result.params = {
        "rates": rates,
        "seconds_per_rate": seconds,
        "files_per_second": 1,
        "settle_files_excluded": settle,
        "drain_timeout_s": drain,
        "poll_interval_s": 0.05,
        "command": "slipstream run trending --input LANDING --catalog CATALOG "
        "--state-dir STATE --sink sqlite:STATE/trending.db",
    }
    runs = [(rate, "default") for rate in rates]
    runs += [(rate, "1s") for rate in ctx.size([], [1_000, 10_000])]
    result.params["runs"] = runs
    for rate, trigger in runs:
        row = one_rate(ctx, rate, seconds, settle, drain, trigger)
        result.add(**row)
    kept = [r["rate"] for r in result.rows if r["keeps_up"] and r["trigger"] == "default"]
    result.headline["highest rate that keeps up"] = f"{max(kept):,} events/s" if kept else "none"
    for r in result.rows:
        result.headline[f"latency at {r['rate']:,}/s, trigger {r['trigger']}: p50/p95/p99 (s)"] = (
            f"{r['latency_p50_s']:.2f} / {r['latency_p95_s']:.2f} / {r['latency_p99_s']:.2f}"
        )
    result.notes.append(
        "headroom = Spark's processing rate (rows / time inside batches) / input rate; busy = "
        "share of wall time inside batches; drift = latency p50 of the first third -> last third; "
        "cpu_cores = CPU time of the run's processes (driver + JVM) / wall time while pacing"
    )
    return result
