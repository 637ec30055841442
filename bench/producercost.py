"""What the latency benchmarks' own load costs the machine (issue 39): a producer sending
`mobile`'s records at `--rate` a second for `--seconds` seconds into a one-partition topic of a
throwaway broker (slipstream.tools.kafka_broker), no engine reading, three ways, alternated,
`--pairs` rounds:

- `each`: one record per request, `linger.ms` 0 (realtime.observe before section 55);
- `ticks`: the records due every 1 ms (realtime.paced), `linger.ms` 0;
- `ticks+linger`: the same with `linger.ms` 1 (realtime.observe's default since).

For each: the broker's CPU (its process's user + system time) and the producer's (this
process's), in cores over the run, and the rate reached.

    .venv/bin/python -m bench.producercost [--rate 10000 --seconds 20 --pairs 2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.scenarios.realtime import ACTIONS, paced, record

#: variant -> (tick in seconds, linger.ms)
VARIANTS = {"each": (0.0, 0), "ticks": (0.001, 0), "ticks+linger": (0.001, 1)}


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(broker: Any, variant: str, rate: int, seconds: float) -> dict[str, Any]:
    from confluent_kafka import Producer

    tick_s, linger = VARIANTS[variant]
    topic = broker.create_topic(f"cost-{int(time.time() * 1000)}", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": linger, "acks": 1})
    total = int(rate * seconds)
    pid = broker.process.pid
    broker0, own0, t0 = cpu_s(pid), time.process_time(), time.monotonic()
    for due in paced(total, rate, tick_s):
        now = datetime.now(UTC)
        for n in due:
            producer.produce(topic, record(ACTIONS[n % len(ACTIONS)], now, n).encode())
        producer.poll(0)
    span = time.monotonic() - t0
    producer.flush(30)
    wall = time.monotonic() - t0
    return {
        "variant": variant,
        "rate_reached": round(total / span),
        "broker_cores": round((cpu_s(pid) - broker0) / wall, 2),
        "producer_cores": round((time.process_time() - own0) / wall, 2),
    }


def main(argv: list[str] | None = None) -> int:
    from slipstream.tools.kafka_broker import KafkaBroker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="slipstream-producercost-") as base:
        broker = KafkaBroker(base=Path(base)).start()
        try:
            for round_ in range(args.pairs):
                order = list(VARIANTS) if round_ % 2 == 0 else list(reversed(VARIANTS))
                for variant in order:
                    runs.append(
                        {"round": round_ + 1, **one(broker, variant, args.rate, args.seconds)}
                    )
                    print(json.dumps(runs[-1]), flush=True)
        finally:
            broker.stop()
    report = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rate": args.rate,
        "seconds": args.seconds,
        "load_1m_after": os.getloadavg()[0],
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
