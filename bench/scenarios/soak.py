"""9. Soak: `trending` at a fixed live rate for a long time; does anything only grow?

`slipstream generate trending --pace live` writes one file a second at `--rate` events/s (with
the generator's default dirt: out-of-order, late, duplicate and malformed events) while
`slipstream run trending` runs on its defaults (default trigger, SQLite sink, quarantine) in a
subprocess, exactly as `make demo` does. Every `sample_s` (60 s) the scenario records, for the
minute just ended:

- batch duration p50 of the results query (from slipstream's batch lines);
- driver heap live after a full GC (`jcmd PID GC.run`, then `GC.heap_info`'s "used"), where the
  driver JVM also runs the executors (local mode). Taken three times a minute; the minute's
  figure is the lowest (`heap_after_gc_mib`, the floor a leak raises) and the highest is kept
  too: a GC during a batch also finds that batch's execution memory live (Tungsten pages of
  up to 64 MiB on the heap), which comes and goes with the batch;
- RSS of the JVM (/proc);
- state rows and state store memory (the results query's last progress in the event log; with
  RocksDB, `memoryUsedBytes` is RocksDB's own estimate);
- input rows (lines landed) against processed rows (rows of the results query's batches).

The run first warms up for `--warmup` minutes (default 20): trending keeps each event id until
the watermark passes its time plus the watermark, so its state reaches its steady size only
after two watermarks (2 x 10 min) of event time, and batch time grows with it until then. Then it
measures for `--minutes`. Verdict: the run fails when the median heap-after-GC or the median
batch p50 of the last third of the measured samples is more than 10% above that of the second
third. The warm-up samples are kept in the table and the plot, marked.
`python -m bench soak --minutes 60 --rate 2000`."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.core import Context, Result, median
from bench.inproc import rss_mib
from bench.procs import Proc, slipstream_command
from bench.stage import param_args

NAME = "soak"
TITLE = "soak: trending at a fixed live rate; heap after GC and batch time must stay flat"
IN_PROCESS = False
GROWTH_LIMIT = 1.10  # last third / second third


def jvm_pid(parent: int, timeout: float = 120) -> int:
    """The JVM that the slipstream process launched (its child `java`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
                fields = text.rsplit(")", 1)[1].split()
                comm = text.split("(", 1)[1].rsplit(")", 1)[0]
            except (OSError, IndexError):
                continue
            if int(fields[1]) == parent and comm == "java":
                return int(stat.parent.name)
        time.sleep(0.5)
    raise RuntimeError("the driver JVM did not start")


def heap_after_gc_mib(pid: int) -> float:
    """Live heap: force a full GC in the JVM, then read the heap's used size (MiB)."""
    subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, check=True, timeout=120)
    out = subprocess.run(
        ["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60
    ).stdout
    for line in out.splitlines():
        if "used" in line and "total" in line:  # " garbage-first heap   total 1234K, used 567K"
            used = line.split("used", 1)[1].strip().split()[0].rstrip(",")
            return float(used.rstrip("K")) / 1024
    raise RuntimeError(f"no heap line in jcmd GC.heap_info: {out[:200]!r}")


def last_progress(event_log: Path, query: str) -> dict[str, Any] | None:
    """The newest progress of `query` in the event log (reads only the log's tail)."""
    if not event_log.exists():
        return None
    with event_log.open("rb") as handle:
        handle.seek(max(0, event_log.stat().st_size - 512 * 1024))
        lines = handle.read().decode("utf-8", "replace").splitlines()
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") == "progress" and record.get("query") == query:
            return record.get("progress")
    return None


class Landed:
    """Lines in the landing folder's files, counted once per file."""

    def __init__(self, landing: Path) -> None:
        self.landing = landing
        self.seen: set[str] = set()

    def new_lines(self) -> int:
        total = 0
        for path in sorted(self.landing.glob("*.jsonl")):
            if path.name not in self.seen:
                self.seen.add(path.name)
                with path.open("rb") as handle:
                    total += sum(1 for _ in handle)
        return total


def growth(samples: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    """(median of the second third, median of the last third, last / second) of the measured
    samples (warm-up left out). Minutes without a value (no batch ended in them: batches longer
    than a minute) are left out."""
    samples = [s for s in samples if not s.get("warmup")]
    third = len(samples) // 3

    def middle(part: list[dict[str, Any]]) -> float:
        values = [s[key] for s in part if s[key] == s[key]]  # NaN != NaN
        return median(values) if values else float("nan")

    second, last = middle(samples[third : 2 * third]), middle(samples[2 * third :])
    return second, last, last / second if second else float("nan")


def plot(samples: list[dict[str, Any]], path: Path, title: str) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    minutes = [s["t_min"] for s in samples]
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    panels = [
        ("heap_after_gc_mib", "driver heap live after GC, floor of 3 a minute (MiB)"),
        ("batch_p50_s", "batch duration p50 (s)"),
        ("rss_mib", "JVM RSS (MiB)"),
        ("state_rows", "state rows"),
    ]
    warm = max((s["t_min"] for s in samples if s.get("warmup")), default=0)
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        if warm:
            ax.axvspan(0, warm, color="0.92", label="warm-up (not judged)")
        ax.plot(minutes, [s[key] for s in samples], marker=".")
        ax.set_title(label, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    minutes = float(ctx.param("minutes", 6, 60))
    warmup = float(ctx.param("warmup", 1, 20))
    rate = int(ctx.param("rate", 2_000, 2_000))
    sample_s = float(ctx.param("sample_s", 30, 60))
    result.params = {
        "minutes": minutes,
        "warmup_minutes": warmup,
        "rate_events_per_s": rate,
        "sample_every_s": sample_s,
        "growth_limit": GROWTH_LIMIT,
        "command": "slipstream generate trending --pace live --rate R & slipstream run trending "
        "--input LANDING --input catalog=CATALOG --state-dir STATE --sink sqlite:STATE/trending.db",
    }
    work = ctx.scratch(f"soak-{rate}")
    landing, state = work / "landing", work / "state"
    catalog = work / "catalog.csv"
    generator = Proc(
        slipstream_command(
            "generate", "trending", "--out", landing, "--catalog", catalog,
            "--report", work / "report.json", "--rate", str(rate), "--seed", "2",
            "--pace", "live", "--start", "now", "--quiet",
        ),
        work / "generator.log",
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not catalog.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    pipeline = Proc(
        slipstream_command(
            "run", "trending", "--input", landing, "--input", f"catalog={catalog}",
            "--state-dir", state, "--sink", f"sqlite:{state / 'trending.db'}",
            *param_args(ctx),
        ),
        work / "run.log",
    )  # fmt: skip
    samples: list[dict[str, Any]] = []
    try:
        pid = jvm_pid(pipeline.popen.pid)
        landed = Landed(landing)
        began = time.monotonic()
        taken = 0
        while time.monotonic() - began < (warmup + minutes) * 60:
            next_at = began + (len(samples) + 1) * sample_s
            heaps = []
            for k in (3, 2, 1):  # three heap readings spread over the interval
                while time.monotonic() < next_at - (k - 1) * sample_s / 3:
                    if not pipeline.alive():
                        log = work / "run.log"
                        raise RuntimeError(f"the run died; log {log}:\n{pipeline.tail()}")
                    time.sleep(1)
                heaps.append(heap_after_gc_mib(pid))
            batches = pipeline.batch_lines("trending.views")
            recent = [b for b in batches[taken:] if b.rows]
            taken = len(batches)
            progress = last_progress(state / "events" / "trending.jsonl", "trending.views")
            operators = (progress or {}).get("stateOperators") or []
            elapsed = (time.monotonic() - began) / 60
            sample = {
                "t_min": round(elapsed, 2),
                "warmup": elapsed <= warmup + 1e-9,
                "batches": len(recent),
                "batch_p50_s": median([b.seconds for b in recent]) if recent else float("nan"),
                "heap_after_gc_mib": round(min(heaps), 1),
                "heap_after_gc_max_mib": round(max(heaps), 1),
                "rss_mib": round(rss_mib(pid), 1),
                "state_rows": sum(int(o.get("numRowsTotal") or 0) for o in operators),
                "state_memory_mib": round(
                    sum(int(o.get("memoryUsedBytes") or 0) for o in operators) / 2**20, 1
                ),
                "input_rows": landed.new_lines(),
                "processed_rows": sum(b.rows for b in recent),
            }
            samples.append(sample)
            ctx.log(
                "  {t_min:6.1f} min  heap {heap_after_gc_mib:7.1f} "
                "(max {heap_after_gc_max_mib:7.1f}) "
                "MiB  rss {rss_mib:7.1f}  "
                "batch p50 {batch_p50_s:5.2f} s  state {state_rows:>9,}  in {input_rows:>8,}  "
                "processed {processed_rows:>8,}".format(**sample)
            )
    finally:
        generator.stop()
        pipeline.stop()
    for sample in samples:
        result.add(**sample)
    verdicts = []
    second, last, ratio = growth(samples, "state_rows")
    result.headline["state rows (not judged): second third -> last third"] = (
        f"{second:,.0f} -> {last:,.0f} ({ratio:.2f}x)"
    )
    for key, label in (("heap_after_gc_mib", "heap after GC"), ("batch_p50_s", "batch p50")):
        second, last, ratio = growth(samples, key)
        flat = ratio <= GROWTH_LIMIT  # False for NaN: no figure is no proof
        verdicts.append(flat)
        result.headline[f"{label}: second third -> last third"] = (
            f"{second:.2f} -> {last:.2f} ({ratio:.2f}x, {'flat' if flat else 'GROWS'})"
        )
    sent = sum(s["input_rows"] for s in samples)
    done = sum(s["processed_rows"] for s in samples)
    result.headline["input rows / processed rows"] = f"{sent:,} / {done:,}"
    result.headline["verdict"] = "flat" if all(verdicts) else "FAILED: grows"
    picture = plot(
        samples,
        ctx.results / f"soak-{rate}-{int(minutes)}min.png",
        f"trending soak: {rate:,} events/s for {minutes:g} min",
    )
    result.notes.append(
        f"plot: {picture}" if picture else "no plot: install matplotlib (pip install '.[bench]')"
    )
    if not all(verdicts):
        result.failed = "heap after GC or batch time grew by more than 10%"
    return result
