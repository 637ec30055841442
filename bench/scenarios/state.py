"""6. State: rows and memory over a long-ish run at a steady key rate, RocksDB vs HDFS-backed.

The trending query's shape on the rate source, so that the input rate is exact and new keys
arrive at a steady rate: every row is a new `event_id` (deduplicated within the watermark) and
one of 1,000 keys (counted in sliding windows). Under the watermark both operators must stop
growing: the deduplication holds about rate x 2 x watermark ids (an id is kept until the
watermark passes its ts + the watermark), the aggregation about keys x (window + watermark) /
slide windows. Each store runs in a JVM of its own (`python -m bench.worker state`), one after
the other, so heap and RSS are comparable. The heap is sampled every 5 s after a full GC (live
data), the RSS of the JVM from /proc; Spark's `memoryUsedBytes` is the store's own estimate."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.core import Context, Result, median, percentile
from bench.procs import Proc

NAME = "state"
TITLE = "state: rows and memory at a steady key rate under the watermark, RocksDB vs HDFS"
IN_PROCESS = False
STORES = ("hdfs", "rocksdb+changelog")


def total_rows(sample: dict[str, Any]) -> int:
    return sum(int(op["rows"] or 0) for op in sample["operators"])


def op_rows(sample: dict[str, Any], name: str) -> int:
    return sum(int(op["rows"] or 0) for op in sample["operators"] if name in (op["name"] or ""))


def summarize(samples: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    if len(samples) < 4:
        raise RuntimeError(f"only {len(samples)} batches ran; the machine is too loaded")
    quarter = [s for s in samples if s["t"] >= 0.75 * seconds]
    final = sum(map(total_rows, quarter)) / max(1, len(quarter))
    plateau_at = float("nan")  # from then on every sample is within 5% of the final level
    for s in reversed(samples):
        if final and abs(total_rows(s) - final) > 0.05 * final:
            break
        plateau_at = s["t"]
    end = samples[-1]
    second_half = [s for s in samples if s["t"] >= 0.5 * seconds]
    rows_in = sum(int(s["rows"] or 0) for s in samples)
    return {
        "batches": len(samples),
        "input_rows_per_s": rows_in / samples[-1]["t"],
        "dedup_rows_end": op_rows(end, "dedupe"),
        "agg_rows_end": op_rows(end, "stateStoreSave"),
        "state_rows_end": total_rows(end),
        "plateau_from_s": plateau_at,
        "plateau": plateau_at <= 0.75 * seconds,
        "store_mem_mib_end": sum(int(op["memory_bytes"] or 0) for op in end["operators"]) / 2**20,
        "heap_live_mib_max": max(s.get("heap_mib", 0) for s in second_half),
        "rss_mib_max": max(s.get("rss_mib", 0) for s in samples),
        "batch_ms_p50": median([float(s["batch_ms"]) for s in second_half]),
        "batch_ms_p95": percentile([float(s["batch_ms"]) for s in second_half], 95),
    }


def series(samples: list[dict[str, Any]], points: int = 12) -> str:
    step = max(1, len(samples) // points)
    picked = samples[step - 1 :: step]
    return ", ".join(f"{s['t']:.0f}s {total_rows(s) / 1000:.0f}k" for s in picked)


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    rate = ctx.param("rate", 5_000, 10_000)
    watermark = ctx.param("watermark_s", 10, 60)
    window, slide = ctx.param("window_slide_s", (10, 5), (60, 20))
    seconds = ctx.param("seconds", 50, 300)
    keys = 1000
    result.params = {
        "rate_rows_per_s": rate,
        "keys": keys,
        "watermark_s": watermark,
        "window_s": window,
        "slide_s": slide,
        "seconds": seconds,
        "expected_dedup_rows": rate * 2 * watermark,
        "stores": list(STORES),
    }
    all_samples: dict[str, list[dict[str, Any]]] = {}
    for store in STORES:
        work = ctx.scratch(store)
        out = work / "samples.jsonl"
        argv = [
            sys.executable,
            "-m",
            "bench.worker",
            "state",
            "--store",
            store,
            "--seconds",
            str(seconds),
            "--rate",
            str(rate),
            "--keys",
            str(keys),
            "--watermark-s",
            str(watermark),
            "--window-s",
            str(window),
            "--slide-s",
            str(slide),
            "--checkpoint",
            str(work / "checkpoint"),
            "--out",
            str(out),
        ]
        ctx.log(f"  {store}: {seconds} s at {rate:,} rows/s")
        proc = Proc(argv, work / "worker.log")
        code = proc.wait(timeout=seconds + 300)
        samples = _read(out)
        if code != 0:
            raise RuntimeError(f"state worker for {store} failed ({code}):\n{proc.tail()}")
        all_samples[store] = samples
        row = summarize(samples, seconds)
        ctx.log(
            f"  {store}: state rows {row['state_rows_end']:,}, flat from "
            f"{row['plateau_from_s']:.0f} s, live heap {row['heap_live_mib_max']:.0f} MiB"
        )
        result.add(store=store, **row)
        result.notes.append(f"{store} state rows over time: {series(samples)}")
    by = {r["store"]: r for r in result.rows}
    if len(by) == 2:
        h, r = by["hdfs"], by["rocksdb+changelog"]
        result.headline["live heap, rocksdb+changelog / hdfs"] = (
            r["heap_live_mib_max"] / h["heap_live_mib_max"]
        )
        result.headline["batch time p50, rocksdb+changelog / hdfs"] = (
            r["batch_ms_p50"] / h["batch_ms_p50"]
        )
        result.headline["plateau (hdfs, rocksdb+changelog)"] = f"{h['plateau']}, {r['plateau']}"
    result.params["series"] = {
        store: [{"t": s["t"], "rows": total_rows(s), "heap_mib": s.get("heap_mib")} for s in ss]
        for store, ss in all_samples.items()
    }
    result.notes.append(
        "plateau_from_s = time from which every sample stays within 5% of the mean of the last "
        "quarter (plateau: flat for at least the last quarter of the run); heap = live heap "
        "after a full GC, max over the second half"
    )
    return result


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
