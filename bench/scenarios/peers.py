"""14. Peers side by side: trending's job on Apache Flink (PyFlink), Pathway and Bytewax, on the
same pre-generated files, on the same machine, in one run.

Each variant is a process of its own, launched and timed the same way, alternated:

- **slipstream (no stage)** and **slipstream, ingest stage**: `slipstream run trending --trigger
  available-now --ingest-stage false|true` to its default SQLite sink (every file in one
  micro-batch, as scenario 3's streaming variants; `--set slipstream='["..."]'` keeps one);
- **flink**, **pathway**, **bytewax**: bench/peers/NAME_trending.py in the peer's own virtual
  environment `.venv-peers/NAME` (`make bench-peers` creates them, pinned by
  bench/peers/requirements-NAME.txt), writing its final rows to a CSV file. Each program's
  docstring says how it expresses the job and where it cannot.

Measured per run: wall time from launch to exit (events/s over all input lines, dirt
included), start-up (launch to the program's "reading" mark; for slipstream, wall time minus
its micro-batches), processing events/s, CPU seconds of the process tree (a fairer figure than
wall time on a shared machine), and peak memory (summed RSS of the process group, /proc every
0.2 s). Output rows are compared with slipstream's and with tests/trending_reference.py (plain
Python + pandas) run twice: over all lines as one batch (what an available-now run over every
file computes: nothing is late), and file by file (what a streaming engine with a 10-minute
watermark computes when it reads the files in order: the generator's late events dropped).

**Latency** (a second table, `--set parts=[...]` picks "throughput" and/or "latency"): for each
of `latency_rates`, measured as scenario 4 measures slipstream (bench/live.py): files of `rate`
events land in a growing folder once a second (atomic rename, event time one second per file,
one marker article per file) for `latency_seconds`; latency = rename -> a row of the file's
marker visible in the engine's output (slipstream: its SQLite table, polled every 50 ms; a peer:
its program in live mode, `--live`, appends every row it emits to a file, flushed per update,
tailed every 50 ms); the first `latency_settle` files are left out. Every engine emits a
window's count before the window closes (SEMANTICS says how), as slipstream's update mode does:
a latency that waited for the window's close would be 20 minutes of event time."""

from __future__ import annotations

import math
import pickle
import shutil
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.core import REPO, Context, Result, alternate, median, paired_ratios, summarize_ratio
from bench.live import LiveRun, PeerLiveRun, latency_row
from bench.peerruns import Row, compare, csv_rows, measure
from bench.procs import slipstream_command
from bench.stage import cli_args
from bench.workloads import TrendingInput, generate_trending, land_all

NAME = "peers"
TITLE = "peers side by side: trending on slipstream, Flink, Pathway, Bytewax, same files"
IN_PROCESS = False
PEERS = ("flink", "pathway", "bytewax")
SLIP, STAGED = "slipstream (no stage)", "slipstream, ingest stage"
SLIPSTREAM = (SLIP, STAGED)  # the ingest stage named in every run (bench/stage.py)
METRICS = (
    "wall_s",
    "events_per_s",
    "startup_s",
    "processing_s",
    "events_per_s_processing",
    "cpu_s",
    "events_per_cpu_s",
    "peak_rss_mib",
)
WINDOW, SLIDE, WATERMARK = timedelta(minutes=10), timedelta(minutes=1), timedelta(minutes=10)
SEMANTICS = {  # when a row of an event's (window, article) first shows in the output
    "slipstream": "update mode: the upserted rows of the micro-batch that read the file",
    "flink": "HOP group window with early fire (delay flink_early_fire; 0 s = every element): "
    "each count update, through the join's changelog to the print sink (in the JVM)",
    "pathway": "incremental windowby: the updated counts of the commit that read the file, "
    "via pw.io.subscribe",
    "bytewax": "partial counts per source batch (one stateful step, not count_window, which "
    "emits only when the watermark closes a window)",
}


def semantics(variant: str) -> str:
    return SEMANTICS["slipstream" if variant in SLIPSTREAM else variant]


def peer_python(peer: str) -> Path:
    return REPO / ".venv-peers" / peer / "bin" / "python"


def references(data: TrendingInput, landing: Path, cache: Path) -> dict[str, set[Row]]:
    """tests/trending_reference.py over the same files: all as one batch, and file by file.
    Kept in `cache` (the same seed and size give the same files), so a rerun with the same
    `--work` directory skips the minutes the reference takes over 1,000,000 lines."""
    from tests.trending_reference import article_views, counted_events

    if cache.exists():
        loaded: dict[str, set[Row]] = pickle.loads(cache.read_bytes())
        return loaded

    now = datetime.now(UTC)
    files = [landing / p.name for p in data.files]
    batches = [p.read_text(encoding="utf-8").splitlines() for p in files]
    one_batch = [[line for lines in batches for line in lines]]
    out = {}
    for label, split in (("one batch", one_batch), ("file by file", batches)):
        events, _ = counted_events(split, WATERMARK, now)
        out[label] = article_views(events, data.catalog, WINDOW, SLIDE)
    cache.write_bytes(pickle.dumps(out))
    return out


def copy_input(data: TrendingInput, work: Path) -> TrendingInput:
    """The same generated files, copied (a live run lands, i.e. moves, its own copy)."""
    staging = work / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    files = [Path(shutil.copy2(p, staging / p.name)) for p in data.files]
    return TrendingInput(staging, data.catalog, files, data.lines_per_file, data.total_lines)


def live_one(ctx: Context, variant: str, data: TrendingInput, rate: int) -> dict[str, Any]:
    """One live run of `variant` over a copy of `data`: start-up, latencies, keeps up."""
    seconds = len(data.files) - 1
    settle = int(ctx.param("latency_settle", 3, 5))
    drain = float(ctx.param("latency_drain", 30, 90))
    work = ctx.scratch(f"latency/{variant.replace(' ', '-')}-{rate}")
    mine = copy_input(data, work / "input")
    if variant in SLIPSTREAM:
        live: LiveRun = LiveRun(work, mine, extra_args=cli_args(variant == STAGED))
    else:
        script = REPO / "bench" / "peers" / f"{variant}_trending.py"
        extra: tuple[str, ...] = ()
        if variant == "flink":  # Flink's early-fire delay: 0 s = on every element
            extra = (f"--early-fire={ctx.param('flink_early_fire', '0 s', '0 s')}",)
        live = PeerLiveRun(work, mine, extra_args=extra, python=peer_python(variant), script=script)
    label = f"{variant} at {rate:,} events/s"
    timeout = float(ctx.param("latency_startup_timeout", 300, 300))
    run = live.measure(seconds, drain, ctx.log, label, startup_timeout=timeout)
    return {
        "rate": rate,
        "engine": variant,
        **latency_row(live, run, settle, ctx.log, label),
        "cpu_cores": run.cpu_cores,
        "marker_views_max": live.poller.max_views,
    }


def latency(ctx: Context, variants: list[str]) -> Result:
    """The latency table: every variant at every rate, alternated (A B C, then C B A)."""
    result = Result(f"{NAME} latency", "latency: files landing once a second, rows visible")
    rates = list(ctx.param("latency_rates", [1_000], [1_000, 10_000]))
    seconds = int(ctx.param("latency_seconds", 15, 60))
    wanted = list(ctx.param("latency_variants", variants, variants))
    absent = [v for v in wanted if v not in SLIPSTREAM and not peer_python(v).exists()]
    wanted = [v for v in wanted if v not in absent]
    if absent:
        result.notes.append(f"not installed (run `make bench-peers`): {', '.join(absent)}")
    result.params = {
        "rates": rates,
        "seconds_per_run": seconds,
        "files_per_second": 1,
        "settle_files_excluded": ctx.param("latency_settle", 3, 5),
        "drain_timeout_s": ctx.param("latency_drain", 30, 90),
        "poll_interval_s": 0.05,
        "variants": wanted,
        "semantics": {v: semantics(v) for v in wanted},
        "flink_early_fire": ctx.param("flink_early_fire", "0 s", "0 s"),
    }
    failed: dict[str, str] = {}
    for i, rate in enumerate(rates):
        ctx.log(f"  latency at {rate:,} events/s: generating {seconds + 1} files")
        data = generate_trending(ctx.work / f"latency-input-{rate}", rate * (seconds + 1),
                                 float(rate), markers=True)  # fmt: skip
        for variant in wanted if i % 2 == 0 else list(reversed(wanted)):
            try:
                result.add(**live_one(ctx, variant, data, rate))
            except RuntimeError as exc:  # one engine must not hide the rest
                failed[f"{variant} at {rate:,}/s"] = str(exc)[:400]
                ctx.log(f"  {variant} at {rate:,}/s failed: {str(exc)[:400]}")
    for what, why in failed.items():
        result.notes.append(f"{what} failed: {why}")
    for rate in rates:
        mine = {r["engine"]: r for r in result.rows if r["rate"] == rate}
        result.headline[f"latency at {rate:,}/s, p50 / p99 s"] = "; ".join(
            f"{v} {r['latency_p50_s']:.2f} / {r['latency_p99_s']:.2f}" for v, r in mine.items()
        )
        for slip in SLIPSTREAM:
            base = mine.get(slip)
            for v, r in mine.items():
                if base is not None and v != slip and (v not in SLIPSTREAM or slip == STAGED):
                    result.headline[f"{slip} / {v} at {rate:,}/s, latency p50, p99"] = (
                        f"{base['latency_p50_s'] / r['latency_p50_s']:.2f}, "
                        f"{base['latency_p99_s'] / r['latency_p99_s']:.2f}"
                    )
    result.notes.append(
        "latency = file renamed into the landing folder -> a row of its marker visible "
        "(slipstream: SQLite; a peer: the live output file), first files after start-up left "
        "out; drift = p50 of the first third -> the last third; keeps up = every file visible "
        "and drift at most 1 s or 10%; cpu_cores = CPU s of the process group / wall s while "
        "pacing; marker_views_max must be 1 (each marker is one event)"
    )
    for v in wanted:
        result.notes.append(f"{v}: {semantics(v)}")
    return result


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    parts = list(ctx.param("parts", ["throughput", "latency"], ["throughput", "latency"]))
    wanted = list(ctx.param("peers", list(PEERS), list(PEERS)))
    installed = [p for p in wanted if peer_python(p).exists()]
    if "throughput" in parts:
        throughput(ctx, result)
    if "latency" in parts:
        result.sections.append(latency(ctx, [*slipstream_variants(ctx), *installed]))
    return result


def slipstream_variants(ctx: Context) -> list[str]:
    wanted = list(ctx.param("slipstream", list(SLIPSTREAM), list(SLIPSTREAM)))
    unknown = [v for v in wanted if v not in SLIPSTREAM]
    if unknown or not wanted:
        raise ValueError(f"--set slipstream= takes some of {list(SLIPSTREAM)}, got {wanted}")
    return wanted


def throughput(ctx: Context, result: Result) -> None:
    from bench.scenarios.flagship import table_rows

    events = ctx.param("events", 100_000, 1_000_000)
    reps = ctx.param("reps", 1, 1)
    timeout = float(ctx.param("timeout", 900, 3600))
    wanted = list(ctx.param("peers", list(PEERS), list(PEERS)))
    missing = [p for p in wanted if not peer_python(p).exists()]
    peers = [p for p in wanted if p not in missing]
    data = generate_trending(ctx.work / "input", events, 2000.0, markers=False)
    landing = ctx.work / "landing"
    land_all(data, landing)
    result.params = {
        "events": data.total_lines,
        "files": len(data.files),
        "repetitions": reps,
        "peers": peers,
        "job": "dedup event_id (10 min), 10-min windows sliding by 1 min, watermark 10 min, "
        "count per (window, article), left join to the catalog",
    }
    if missing:
        result.notes.append(f"not installed (run `make bench-peers`): {', '.join(missing)}")
    ctx.log(f"  {data.total_lines:,} events in {len(data.files)} files")
    outputs: dict[str, Path] = {}
    failed: dict[str, str] = {}

    def one(variant: str, rep: int) -> dict[str, Any]:
        work = ctx.scratch(f"runs/{variant.replace(' ', '-')}-{rep + 1}")
        log = work / "run.log"
        if variant in SLIPSTREAM:
            db = work / "out.db"
            argv = slipstream_command(
                "run", "trending", "--input", landing, "--input", f"catalog={data.catalog}",
                "--trigger", "available-now", "--state-dir", work, "--sink", f"sqlite:{db}",
                *cli_args(variant == STAGED),
            )  # fmt: skip
            outputs[variant] = db
        else:
            out = work / "rows.csv"
            script = REPO / "bench" / "peers" / f"{variant}_trending.py"
            argv = [str(peer_python(variant)), str(script), str(landing), str(data.catalog)]
            argv.append(str(out))
            outputs[variant] = out
        try:
            return measure(argv, log, data.total_lines, timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:  # one peer must not hide the rest
            outputs.pop(variant, None)
            failed[variant] = f"{type(exc).__name__}: {str(exc)[:300]}"
            return dict.fromkeys(METRICS, math.nan)

    slips = slipstream_variants(ctx)
    variants = [*slips, *peers]
    runs = alternate(variants, one, reps, warmup=False, log=ctx.log)
    for v, why in failed.items():
        result.notes.append(f"{v} failed: {why}")
    variants = [v for v in variants if v in outputs]
    slips = [v for v in slips if v in outputs]
    if not slips:
        result.failed = "slipstream's run failed: nothing to compare with"
        return
    first = slips[0]  # the rows every other engine's are compared with
    tables = {
        v: table_rows(outputs[v]) if v in SLIPSTREAM else csv_rows(outputs[v]) for v in variants
    }
    refs: dict[str, set[Row]] = {}
    if ctx.param("reference", True, True):
        refs = references(data, landing, ctx.work / f"reference-{events}.pickle")
    for v in variants:
        mine = [r for r in runs if r["variant"] == v]
        row: dict[str, Any] = {"variant": v, "events": data.total_lines}
        for metric in METRICS:
            row[metric] = median([r[metric] for r in mine])
        row["output_rows"] = len(tables[v])
        row["views"] = sum(r[5] for r in tables[v])
        same = compare(tables[v], tables[first])
        row[f"rows = {first}"] = same["equal"]
        for label, ref in refs.items():
            versus = compare(tables[v], ref)
            row[f"rows = reference, {label}"] = versus["equal"]
            if not versus["equal"] and label == "file by file":
                windows = Counter(r[0] for r in tables[v] ^ ref).most_common(3)
                result.notes.append(
                    f"{v} vs reference ({label}): {versus['rows_only_here']} rows only in {v}, "
                    f"{versus['rows_only_there']} only in the reference, views "
                    f"{versus['views_diff']:+,}; windows most concerned: {windows}"
                )
        result.add(**row)
        if not same["equal"]:
            result.notes.append(
                f"{v} vs {first}: {same['rows_only_here']} rows only in {v}, "
                f"{same['rows_only_there']} only in {first}, views {same['views_diff']:+,}"
            )
    for label, ref in refs.items():
        result.headline[f"reference ({label}): rows, views"] = (
            f"{len(ref):,} rows, {sum(r[5] for r in ref):,} views"
        )
    others = [(slip, v) for slip in slips for v in variants if v not in SLIPSTREAM]
    if len(slips) == 2:
        others.append((STAGED, SLIP))
    for slip, peer in others:
        for metric, label in (
            ("events_per_s", "events/s, launch to exit"),
            ("events_per_s_processing", "events/s, processing"),
            ("events_per_cpu_s", "events per CPU second"),
        ):
            result.headline[f"{slip} / {peer}, {label}"] = summarize_ratio(
                paired_ratios(runs, metric, slip, peer)
            )
    result.notes.append(
        "events = every input line (dirt included); wall = launch to exit, start-up included; "
        "processing = from the program's 'reading' mark (slipstream: its micro-batches) to "
        "its end; CPU = user + system seconds of the process tree; memory = peak summed RSS"
    )
    result.notes.append(f"python {sys.version.split()[0]}; peers' pins: bench/peers/")
