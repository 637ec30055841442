"""Where a JVM's threads spent their samples (issue 40: the next cost inside a batch), from a
Java Flight Recorder file: the JDK's own `jfr` tool prints the samples, this counts them by
the innermost frame (self) and by every frame on the stack (inclusive), for the threads whose
name contains `--threads`, from `--since` (an ISO time, UTC: after a benchmark's loading batch)
on. Java code and native calls (RocksDB's JNI) are sampled separately; both are shown.

    JAVA_TOOL_OPTIONS="-XX:StartFlightRecording=filename=F.jfr,settings=profile" \\
      .venv/bin/python -m bench.dedupstate --variants timers --pairs 1 --batches 20
    .venv/bin/python -m bench.jfrtop F.jfr --since 2026-12-03T10:10:19 [--threads Executor]
        [--top 25] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

EVENTS = {"java": "jdk.ExecutionSample", "native": "jdk.NativeMethodSample"}


def frames(event: dict[str, Any]) -> list[str]:
    stack = event["values"]["stackTrace"]["frames"]
    return [
        f["method"]["type"]["name"].rsplit("/", 1)[-1] + "." + f["method"]["name"] for f in stack
    ]


def top(recording: Path, since: str, threads: str, limit: int) -> dict[str, Any]:
    jfr = shutil.which("jfr")
    if jfr is None:
        raise SystemExit("jfr: the JDK's tool is not on PATH")
    out: dict[str, Any] = {"recording": recording.name, "since": since, "threads": threads}
    for kind, name in EVENTS.items():
        printed = subprocess.run(
            [jfr, "print", "--json", "--events", name, str(recording)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        kept = [
            e
            for e in json.loads(printed)["recording"]["events"]
            if e["values"]["startTime"] >= since
            and threads in (e["values"]["sampledThread"].get("javaName") or "")
        ]
        self_: collections.Counter[str] = collections.Counter()
        inclusive: collections.Counter[str] = collections.Counter()
        for event in kept:
            stack = frames(event)
            if stack:
                self_[stack[0]] += 1
            inclusive.update(set(stack))
        out[kind] = {
            "samples": len(kept),
            "self": self_.most_common(limit),
            "inclusive": inclusive.most_common(limit),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", type=Path)
    parser.add_argument("--since", default="", help="ISO time (UTC); the samples from it on")
    parser.add_argument("--threads", default="Executor", help="a part of the threads' names")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = top(args.recording, args.since, args.threads, args.top)
    for kind in EVENTS:
        print(f"{kind}: {result[kind]['samples']} samples")
        for label in ("self", "inclusive"):
            for frame, count in result[kind][label]:
                print(f"  {label:9} {count:5}  {frame}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
