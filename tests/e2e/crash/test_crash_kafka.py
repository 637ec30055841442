"""The crash suite on Kafka (issue 27 item 5), lean: mobile reading a topic into SQLite and
PostgreSQL, `slipstream run` SIGKILLed at the moments tests/e2e/crash/test_crash.py kills it (after
the sink committed a batch and before the checkpoint did, into SQLite; at a seeded random moment
after a batch started, into PostgreSQL), restarted on the same checkpoint; records are produced
to the topic between the runs instead of files landed. At the end each table equals pandas over
every record produced, and the quarantine holds each malformed record once."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from slipstream.core.files import write_atomically
from tests.e2e.crash.test_crash import (
    CASES,
    SEED,
    SPARK_ARGS,
    Chain,
    pg_ledger,
    read_pg,
    read_sqlite,
    sqlite_ledger,
)
from tests.helpers import quarantine_records
from tests.services import produce

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres, pytest.mark.kafka]

# lean (the suite's time in CI): what differs from files is the source's replay, so the two kills
# that cut a batch between its offsets and its commit; the sinks' own kills (inside the
# transaction too) are tests/e2e/crash/test_crash.py's, the same with any source
PLANS = {"sqlite": ("after-write",), "postgresql": ("random",)}


@dataclass
class KafkaChain(Chain):
    """A chain whose input is a topic: `land` produces a file's records to it (and keeps the
    file beside, for the independent computation); each batch reads at most 40 records."""

    bootstrap: str = ""
    topic: str = ""

    def land(self, count: int) -> None:
        for _ in range(count):
            index = len(self.files)
            lines = self.case.make_file(self.rng, index)
            self.malformed += self.case.malformed(lines)
            self.files.append(write_atomically(self.input, f"produced-{index:04d}.json", lines))
            produce(self.bootstrap, self.topic, lines)

    def command(self) -> list[str]:
        url = f"kafka://{self.bootstrap}/{self.topic}?startingOffsets=earliest&maxOffsetsPerTrigger=40"
        return [
            *super().command()[:5], "--input", url, "--checkpoint", str(self.checkpoint),
            "--state-dir", str(self.workdir / "state"), "--trigger", self.trigger,
            *SPARK_ARGS, *self.sink_args,
        ]  # fmt: skip


def test_a_kafka_input_survives_sigkills_exactly_once(
    kafka_spark: Any, kafka: Any, postgres: Any, pg_database: str, tmp_path: Path
) -> None:
    case = CASES["mobile"]
    db = tmp_path / "sqlite" / "results.db"
    pg_url = f"{postgres.url(pg_database)}?parallel_rows=0"
    chains = {
        "sqlite": KafkaChain(
            case, "sqlite", ["--sink", f"sqlite:{db}", "--table", "mobile", "--mode", "update"],
            tmp_path / "sqlite", random.Random(f"{SEED}-kafka-sqlite"), ledger=sqlite_ledger(db),
            bootstrap=kafka.bootstrap, topic=kafka.create_topic("crash-sqlite", 2),
        ),
        "postgresql": KafkaChain(
            case, "postgresql", ["--sink", pg_url, "--table", "mobile", "--mode", "update"],
            tmp_path / "postgresql", random.Random(f"{SEED}-kafka-pg"),
            ledger=pg_ledger(postgres, pg_database),
            bootstrap=kafka.bootstrap, topic=kafka.create_topic("crash-pg", 2),
        ),
    }  # fmt: skip
    started = time.monotonic()

    def drive(name: str) -> None:
        chain = chains[name]
        chain.crash_loop(list(PLANS[name]), (3, 4))
        chain.finish()

    with ThreadPoolExecutor(len(chains)) as pool:
        for future in [pool.submit(drive, name) for name in chains]:
            future.result()
    outputs = {
        "sqlite": read_sqlite(db, "mobile"),
        "postgresql": read_pg(postgres, pg_database, "mobile"),
    }
    report = [f"crash suite on kafka, mobile, seed {SEED}, {time.monotonic() - started:.0f}s"]
    for name, output in outputs.items():
        chain = chains[name]
        expected = case.expected_table(chain.files)
        got = case.normalise(output)
        report.append(
            f"  {name:<11} {len(chain.kills)} kills, {chain.runs} runs, {len(chain.files)} "
            f"files produced: count total {got['count'].sum()} vs {expected['count'].sum()}"
        )
        report += [f"      {k.kind:<13} {k.where}" for k in chain.kills]
        assert not got.duplicated(list(case.key)).any(), f"{name}: a key written twice"
        pd.testing.assert_frame_equal(got, expected, obj=f"{name} output")
        quarantined = quarantine_records(
            chain.workdir / "state" / "quarantine" / "mobile" / "actions"
        )
        assert len(quarantined) == chain.malformed, f"{name}: quarantine not exactly-once"
    print("\n".join(report))
    kills = [k for chain in chains.values() for k in chain.kills]
    assert {k.kind for k in kills} == {"after-write", "random"}, report
