"""What a finite run pays after its last batch (issue 40: a run's fixed cost): `sensors`
available-now over a small generated input, warm runs in this process's JVM, each on a new
checkpoint, every output to noop (the shared stage on, as a user runs it). For each run: its
seconds (`runner.start` to `Run.wait` returning) and its tail, from the end of the run's last
batch (Spark's progress: the batch's start plus its `triggerExecution`) to `wait` returning.

    .venv/bin/python -m bench.runend --readings 20000 --runs 8 --label NAME >> FILE.jsonl

One JSON line per process. Two commits are compared by running this benchmark over each one's
slipstream, alternated (`PYTHONPATH=CHECKOUT/src:.`, the JVM parser's jar copied into the
checkout when it is not built there); the first two runs of a process are not kept (the JIT's
warm-up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import inproc
from bench.core import Stopwatch
from bench.scenarios import sensors

WARM_UP = 2


def batch_end(progress: Any) -> float:
    """When a batch ended, in seconds since the epoch (its start plus its trigger's time)."""
    started = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00"))
    return started.timestamp() + (progress["durationMs"] or {}).get("triggerExecution", 0) / 1000


def one_run(folder: Path, scratch: Path) -> tuple[float, float]:
    """A run's seconds and its tail."""
    spark = inproc.session()
    with inproc.sql_conf(spark, sensors.cli_conf(folder)):
        watch = Stopwatch()
        flags = {"input": folder, "sink": "noop", "trigger": "available-now",
                 "ingest_stage": False, "state_dir": scratch}  # fmt: skip
        run = inproc.start_run(spark, "sensors", flags)
        run.wait()
        seconds = watch.seconds()
        returned = datetime.now().timestamp()
    last = max(batch_end(p) for q in run.queries.values() for p in q.recentProgress)
    return seconds, returned - last


def commit(checkout: Path) -> str:
    """The commit of the checkout this process imports slipstream from."""
    found = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    return found.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    import slipstream

    with tempfile.TemporaryDirectory(prefix="runend-") as tmp:
        work = Path(tmp)
        readings = sensors.write_readings(work / "readings", args.readings)
        kept = [one_run(work / "readings", work / f"run-{i}") for i in range(args.runs + WARM_UP)]
    kept = kept[WARM_UP:]
    seconds, tails = [s for s, _ in kept], [t for _, t in kept]
    print(json.dumps({
        "label": args.label, "commit": commit(Path(slipstream.__file__).parent),
        "readings": readings, "runs": len(kept),
        "seconds_median": round(statistics.median(seconds), 3),
        "tail_median": round(statistics.median(tails), 3),
        "seconds": [round(s, 3) for s in seconds], "tails": [round(t, 3) for t in tails],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
