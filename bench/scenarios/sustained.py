"""4. Sustained rate and end-to-end latency of `trending` with the default trigger.

For each input rate, files of `rate` events land in the landing folder once a second (event
time advances one second per file, like a live feed) while `slipstream run trending --input
DIR --catalog FILE --ingest-stage false|true` runs in a subprocess with its defaults otherwise
(default trigger, SQLite sink); each variant names the ingest stage (issue 26). The variant
`bare` is the engine's own cost (issue 40): the bare PySpark query of the same shape
(bench/bare_trending.py) over the same files into the same table, run the same way.

- **keeps up?** Every landed file's counts become visible before the drain deadline and the
  latency of the last third of the files is not drifting up: its p50 at most 1 s (or 10%) above
  the first third's. A query that is slower than its input shows it as latency that grows for
  as long as the input lasts; one that keeps up holds a steady latency. With the default
  trigger a slower query does not fall behind at once: each batch takes whatever landed
  meanwhile, so batches grow until their fixed cost is amortised; `busy` (the share of wall
  time the results query spends inside batches) near 1 and `headroom` (Spark's rows / busy
  time over the input rate) near 1 say that it keeps up only that way, with latency at about
  two batch times.
- **latency**: from the moment a file is renamed into the landing folder to the moment a row of
  its marker article is visible in `article_views` (polled every 50 ms, so latencies are
  over-stated by about 25 ms). The first files after start-up are left out (JIT warm-up).
"""

from __future__ import annotations

from typing import Any

from bench import inproc
from bench.core import Context, Result
from bench.live import BareLiveRun, LiveRun, latency_row
from bench.stage import cli_args

NAME = "sustained"
TITLE = "sustained rate and latency: trending, default trigger, files landing every second"
IN_PROCESS = False
BARE = "bare"  # the bare PySpark query (bench/bare_trending.py)
#: `store=NAME`: a state store of inproc.STATE_STORES (those a variant's commas do not cut)
STORES = [name for name in inproc.STATE_STORES if "," not in name]


def variant_args(variant: str) -> tuple[str, ...]:
    """'ingest-stage=false' | 'ingest-stage=true,trigger=1s' | ... -> CLI flags. Every variant
    names the ingest stage (`ingest-stage=true|false`): its default is changing
    (bench/stage.py)."""
    args: list[str] = []
    parts = list(filter(None, variant.split(",")))
    if not any(p.startswith("ingest-stage=") for p in parts):
        raise ValueError(f"variant {variant!r} must name ingest-stage=true|false")
    for part in parts:
        if part == "default":
            continue
        key, _, value = part.partition("=")
        if key == "trigger":
            args += ["--trigger", value]
        elif key == "partitions":
            args += ["--conf", f"spark.sql.shuffle.partitions={value}"]
        elif key == "store" and value in STORES:
            args += [
                a for k, v in inproc.STATE_STORES[value].items() for a in ("--conf", f"{k}={v}")
            ]
        elif key == "late-rows":
            args += ["--late-rows", value]
        elif key == "max-files":
            args += ["--max-files-per-trigger", value]
        elif key == "dedup":
            args += ["--dedup", value]
        elif key == "conf" and "=" in value:
            args += ["--conf", value]
        elif key == "ingest-stage" and value in ("true", "false"):
            args += [*cli_args(value == "true")]
        else:
            raise ValueError(
                f"unknown variant part {part!r} "
                "(ingest-stage=, trigger=, late-rows=, partitions=, dedup=, "
                f"max-files=, conf=KEY=VALUE, store={'|'.join(STORES)})"
            )
    return tuple(args)


def one_rate(
    ctx: Context, rate: int, seconds: int, settle: int, drain: int, variant: str, index: int = 0
) -> dict[str, Any]:
    label = f"{rate:,} events/s, {variant}"
    ctx.log(f"  {label}: generating {seconds + 1} files")
    safe = variant.replace("=", "-").replace(",", "+")
    work = ctx.scratch(f"run-{index:02d}-rate-{rate}-{safe}")  # a variant given twice: a pair
    if variant == BARE:
        live: LiveRun = BareLiveRun.prepare(work, rate, seconds)
    else:
        live = LiveRun.prepare(work, rate, seconds, variant_args(variant))
    run = live.measure(seconds, drain, ctx.log, label)
    spark = live.spark_rates(run.began, run.drained_at)
    began, ended = run.began, run.ended
    input_rate = live.events_landed(began, ended) / (ended - began)
    headroom = spark["processing_rows_per_s"] / input_rate if input_rate else float("nan")
    return {
        "rate": rate,
        "variant": variant,
        "input_events_per_s": input_rate,
        "cpu_cores": run.cpu_cores,
        "spark_rows_per_s": spark["processing_rows_per_s"],
        "headroom": headroom,
        "busy": spark["busy_share"],
        "batches": spark["batches"],
        "batch_s_p50": spark["batch_s_p50"],
        **latency_row(live, run, settle, ctx.log, label),
    }


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    rates = ctx.param("rates", [1_000, 10_000], [1_000, 10_000, 50_000])
    both = [*(f"ingest-stage={on}" for on in ("false", "true")), BARE]
    variants = list(ctx.param("variants", both, both))
    base = variants[0]  # the ratios' denominator, and the variant run alone at other rates
    variant_rates = ctx.param("variant_rates", rates, [1_000, 10_000])
    seconds = ctx.param("seconds", 20, 60)
    settle = ctx.param("settle", 3, 5)
    drain = ctx.param("drain", 30, 90)
    result.params = {
        "rates": rates,
        "variants": variants,
        "variant_rates": variant_rates,
        "seconds_per_run": seconds,
        "files_per_second": 1,
        "settle_files_excluded": settle,
        "drain_timeout_s": drain,
        "poll_interval_s": 0.05,
        "command": "slipstream run trending --input LANDING --catalog CATALOG "
        "--state-dir STATE --sink sqlite:STATE/trending.db --ingest-stage false|true "
        "[variant flags]",
    }
    # every variant at the rates it is compared at, alternated (A B, B A, ...); the default
    # alone at the other rates
    runs: list[tuple[int, str]] = []
    for i, rate in enumerate(rates):
        mine = variants if rate in variant_rates else [base]
        runs += [(rate, v) for v in (mine if i % 2 == 0 else list(reversed(mine)))]
    for index, (rate, variant) in enumerate(runs):
        result.add(**one_rate(ctx, rate, seconds, settle, drain, variant, index))
    for variant in variants:
        kept = [r["rate"] for r in result.rows if r["keeps_up"] and r["variant"] == variant]
        result.headline[f"highest rate that keeps up, {variant}"] = (
            f"{max(kept):,} events/s" if kept else "none"
        )
    for r in result.rows:
        result.headline[f"latency at {r['rate']:,}/s, {r['variant']}: p50/p95/p99 (s)"] = (
            f"{r['latency_p50_s']:.2f} / {r['latency_p95_s']:.2f} / {r['latency_p99_s']:.2f}"
        )
    for rate in variant_rates:
        first = next((r for r in result.rows if r["rate"] == rate and r["variant"] == base), None)
        for r in result.rows:
            if first is None or r["rate"] != rate or r["variant"] == base:
                continue
            result.headline[f"{r['variant']} / {base} at {rate:,}/s: latency p50, p99, CPU"] = (
                f"{r['latency_p50_s'] / first['latency_p50_s']:.2f}, "
                f"{r['latency_p99_s'] / first['latency_p99_s']:.2f}, "
                f"{r['cpu_cores'] / first['cpu_cores']:.2f}"
            )
    result.notes.append(
        "headroom = Spark's processing rate (rows / time inside batches) / input rate; busy = "
        "share of wall time inside batches; drift = latency p50 of the first third -> last third; "
        "cpu_cores = CPU time of the run's processes (driver + JVM) / wall time while pacing"
    )
    return result
