"""Crash suite for the shared stage (runtime/shared_stage.py): `sensors` available-now, its
watermark and deduplication in one shared query whose rows its three outputs read, SIGKILLed
inside the shared query's batch, inside an output's SQLite transaction, after an output's write
and at random, restarted from the same checkpoint (tests/e2e/crash/test_crash.py's Chain). No
`--max-files-per-trigger`: a run's new files are one batch, so the late rows depend on where
the batches fell, which the shared query's own logs say; the independent model replays the same
batches. At the end every output equals it, and each record is quarantined, dropped as late
(in the dead-letter) or counted exactly once."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from slipstream.checkpoint.logs import files_read_by
from slipstream.sinks.sqlite import read_table
from slipstream.tools.generators import sensors as sensors_generator
from slipstream.tools.generators.streams import Report, StreamSpec, generate
from tests import stream_reference as ref
from tests.e2e.crash.test_crash import SEED, Chain, CrashCase, pooled_file
from tests.helpers import data_batch_ids, late_records, quarantine_records
from tests.spark.pipelines.test_sensors import (
    WATERMARK,
    WINDOW,
    _assert_alerts,
    _assert_baseline,
    _assert_stats_equal,
)

pytestmark = [pytest.mark.slow]

PLAN = ("shared", "before-commit", "random", "after-write")
SHARED = "shared.readings"


@cache
def pool() -> tuple[list[Path], Report]:
    import atexit
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="slipstream-crash-shared-"))
    atexit.register(shutil.rmtree, root, True)
    spec = StreamSpec(
        duration=timedelta(minutes=80), seed=SEED % 1000, file_every=timedelta(minutes=4),
        watermark=WATERMARK, window=WINDOW, out_of_order=0.08, late=0.05, duplicates=0.05,
        malformed=0.04,
    )  # fmt: skip
    report = generate(spec, sensors_generator.Sensors(8, 2, 2, 2, seed=spec.seed), root)
    return sorted(root.glob("readings-*.jsonl")), report


def _reading(now: datetime) -> Callable[[str], dict[str, Any] | None]:
    return lambda line: ref.sensor_reading(line, now)


class Sensors(CrashCase):
    pipeline = "sensors"

    def make_file(self, rng: random.Random, index: int) -> list[str]:
        return pooled_file(pool()[0], index)

    def malformed(self, lines: list[str]) -> int:
        parse = _reading(datetime.now(UTC))
        return sum(parse(line) is None for line in lines)


@dataclass
class SharedChain(Chain):
    """A Chain whose runs batch every new file together (the shared stage's finite runs), and
    whose `shared` kill lands inside the shared query's batch."""

    def command(self) -> list[str]:
        command = super().command()
        at = command.index("--max-files-per-trigger")
        return command[:at] + command[at + 2 :]

    def shared_kill(self) -> bool:
        outputs, self.results = self.results, self.checkpoint / SHARED
        try:
            killed = self.random_kill((0.0, 0.5))
        finally:
            self.results = outputs
        if killed:
            self.kills[-1].kind = "shared"
        return killed

    def plan(self) -> None:
        for kind in PLAN:
            for _attempt in range(2):
                self.land(self.rng.randint(2, 3))
                if kind == "shared":
                    killed = self.shared_kill()
                elif kind == "random":
                    killed = self.random_kill()
                else:
                    killed = self.fault_kill(kind)
                if killed:
                    break


def _shared_batches(checkpoint: Path) -> list[list[str]]:
    """The lines of each data batch the shared query committed, from its own logs."""
    ids = data_batch_ids(checkpoint)
    seen: set[str] = set()
    batches = []
    for batch in ids:
        files = [f for f in files_read_by(checkpoint, batch) if f not in seen]
        seen.update(files)
        lines = []
        for name in files:
            path = Path(name.removeprefix("file:"))
            lines += path.read_text().splitlines()
        batches.append(lines)
    return batches


@pytest.mark.spark
def test_the_shared_stage_survives_sigkills_exactly_once(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    chain = SharedChain(
        Sensors(), "sensors", ["--sink", f"sqlite:{db}"], tmp_path / "sensors",
        random.Random(f"{SEED}-shared"),
    )  # fmt: skip
    started = time.monotonic()
    chain.plan()
    chain.finish()
    checkpoint = chain.checkpoint / SHARED
    batches = _shared_batches(checkpoint)
    assert sum(map(len, batches)) == sum(len(p.read_text().splitlines()) for p in chain.files)
    readings, stats = ref.counted_readings(batches, WATERMARK, data_batch_ids(checkpoint))
    tables = {n: read_table(db, n) for n in ("sensor_stats", "sensor_alerts", "sensor_baseline")}
    run = {"report": pool()[1], "tables": tables, "readings": readings, "stats": stats}
    _assert_stats_equal(tables["sensor_stats"], ref.sensor_stats(readings, WINDOW), WINDOW)
    _assert_alerts(run, WINDOW)
    _assert_baseline(run)
    state = chain.workdir / "state"
    late = late_records(state, chain.checkpoint.name, SHARED)  # it follows --checkpoint
    assert sum(len(b) for b in late.values()) == stats["late"] > 0
    quarantined = quarantine_records(state / "quarantine" / "sensors" / "readings")
    assert len(quarantined) == chain.malformed == stats["invalid"] > 0
    report = [f"crash suite sensors (shared stage), seed {SEED}, {time.monotonic() - started:.0f}s"]
    report += [f"  {k.kind:<13} {k.where} ({k.seconds:.1f}s after start)" for k in chain.kills]
    print("\n".join(report))
    assert len(chain.kills) >= 3, report
    assert any(k.where.startswith("inside") for k in chain.kills), report
