"""5. Recovery: SIGKILL a running `slipstream run trending`, restart it, time the way back.

Files keep landing once a second the whole time (the feed does not wait for us). After a
steady period the run's whole process group (Python driver and JVM) gets SIGKILL, as in a
crash of the machine or the container; the same command is started again at once. Measured
from the restart:

- **first batch**: the first micro-batch of the new process completes (its console line), and
  the first new ledger row is committed in SQLite (the serving side sees new counts);
- **caught up**: every file that landed before the restart is visible in the serving table;
- **live again**: a file landed after the restart is visible within 1.5 x the steady p95.

Exactly-once check: each marker is one event, so no row of a marker article may count more
than 1 view after the replays."""

from __future__ import annotations

import time
from typing import Any

from bench.core import Context, Result
from bench.live import LiveRun, latency_summary
from bench.stage import param_args

NAME = "recovery"
TITLE = "recovery: SIGKILL trending mid-stream, restart, time to first batch and to catch up"
IN_PROCESS = False


def wait_running(live: LiveRun, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not live.alive():
            raise RuntimeError(live.failure("the run died on its own"))
        time.sleep(0.2)


def one_kill(live: LiveRun, steady_s: float, catchup_timeout: float) -> dict[str, Any]:
    wait_running(live, steady_s)
    now = time.monotonic()
    recent = [k for k, t in live.pacer.landed.items() if now - steady_s <= t and k > 0]
    steady = latency_summary(live.latencies(first=min(recent) if recent else 1))
    assert live.proc is not None
    killed = live.proc.kill()
    restarted = live.launch()
    landed_before = sorted(k for k, t in live.pacer.landed.items() if t <= restarted)
    backlog = live.backlog(restarted)
    backlog_events = sum(
        live.data.lines_per_file[k] for k in landed_before if k not in live.poller.snapshot()
    )
    caught_up = live.poller.wait_for(landed_before, catchup_timeout, live.alive)
    seen = live.poller.snapshot()
    caught_s = max(seen[k] for k in landed_before) - restarted if caught_up else float("nan")
    threshold = 1.5 * steady["p95_s"]
    live_again = float("nan")
    deadline = time.monotonic() + catchup_timeout
    while time.monotonic() < deadline:
        seen = live.poller.snapshot()
        fresh = [
            (k, t) for k, t in sorted(live.pacer.landed.items()) if t > restarted and k in seen
        ]
        hits = [seen[k] - restarted for k, t in fresh if seen[k] - t <= threshold]
        if hits:
            live_again = min(hits)
            break
        if live.pacer.done and not fresh:
            break
        time.sleep(0.2)
    lines = live.proc.batch_lines("trending.views")
    first_line = lines[0].at - restarted if lines else float("nan")
    ledger = [t for _, t in live.poller.ledger_seen if t > restarted]
    return {
        "steady_p50_s": steady["p50_s"],
        "steady_p95_s": steady["p95_s"],
        "killed_after_s": killed - live.launches[-2],
        "backlog_files": backlog,
        "backlog_events": backlog_events,
        "first_batch_s": first_line,
        "first_commit_s": ledger[0] - restarted if ledger else float("nan"),
        "caught_up_s": caught_s,
        "live_again_s": live_again,
    }


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    rate = ctx.param("rate", 1_000, 2_000)
    kills = ctx.param("kills", 1, 2)
    steady_s = ctx.param("steady_s", 15, 30)
    catchup_timeout = ctx.param("catchup_timeout", 120, 180)
    seconds = steady_s + kills * (steady_s + 2 * catchup_timeout) + 60
    result.params = {
        "rate_events_per_s": rate,
        "kills": kills,
        "steady_s_before_each_kill": steady_s,
        "catch_up_timeout_s": catchup_timeout,
        "signal": "SIGKILL to the process group (driver + JVM)",
        "stage": " ".join(param_args(ctx)),
    }
    ctx.log(f"  generating {seconds} files of {rate:,} events")
    live = LiveRun.prepare(ctx.scratch("run"), rate, seconds, param_args(ctx))
    try:
        startup = live.start()
        ctx.log(f"  first file visible after {startup:.1f} s; pacing")
        live.pace()
        for k in range(kills):
            row = one_kill(live, steady_s, catchup_timeout)
            ctx.log(
                f"  kill {k + 1}: first batch {row['first_batch_s']:.1f} s, caught up "
                f"{row['caught_up_s']:.1f} s after restart"
            )
            result.add(kill=k + 1, **row)
        live.pacer.stop()
        live.drain(catchup_timeout)
    finally:
        live.stop()
    result.headline["cold start (launch -> first file visible)"] = f"{startup:.1f} s"
    for r in result.rows:
        result.headline[f"kill {r['kill']}: restart -> first batch / caught up / live (s)"] = (
            f"{r['first_batch_s']:.1f} / {r['caught_up_s']:.1f} / {r['live_again_s']:.1f}"
        )
    result.headline["exactly-once: max views of a one-event marker (must be 1)"] = (
        live.poller.max_views
    )
    result.notes.append(
        "times are from the restart (the new process's launch); backlog = files landed before "
        "the restart whose counts were not visible yet"
    )
    return result
