"""Many scenarios, one after the other, and the report of the campaign: how many ran, the
faults injected by kind, the outcomes, and every defect with the command that reproduces it."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.chaos import outputs
from tests.chaos.execute import execute
from tests.chaos.runner import Outcome, Sink, reproduce
from tests.chaos.scenario import Scenario, plan


def make_sink(
    scenario: Scenario, workdir: Path, postgres: Any, kafka: Any = None, disk: Path | None = None
) -> Sink:
    """`kafka`: a started KafkaBroker, for the Kafka sink (a topic of the scenario's own is
    created on it); `disk`: where the state dir is (the SQLite file goes beside it)."""
    table = scenario.pipeline
    if scenario.sink == "kafka":
        topic = kafka.create_topic(f"chaos-sink-{scenario.seed}-{time.time_ns()}", 1)
        return Sink(
            ["--sink", f"kafka://{kafka.bootstrap}/{topic}", "--mode", "update"],
            lambda: outputs.read_kafka(kafka.bootstrap, topic),
            final_only=False,
        )
    if scenario.sink == "sqlite":
        db = (disk or workdir) / "results.db"
        args = ["--sink", f"sqlite:{db}", "--table", table, "--mode", "update"]
        return Sink(args, lambda: outputs.read_sqlite(db, table), final_only=False)
    if scenario.sink == "parquet":
        folder = workdir / "out"
        return Sink(
            ["--sink", f"parquet:{folder}"], lambda: outputs.read_parquet_sink(folder), True
        )
    if scenario.sink == "delta":
        folder = workdir / "delta"
        args = ["--sink", f"delta:{folder}", "--mode", "update"]
        return Sink(args, lambda: outputs.read_delta(folder), final_only=False)
    from tests.services import APP_PASSWORD

    database = postgres.create_database(f"chaos_{scenario.seed}")
    args = ["--sink", f"{postgres.url(database)}?parallel_rows=0", "--table", table]
    return Sink(
        [*args, "--mode", "update"],
        lambda: outputs.read_pg(postgres, database, table),
        final_only=False,
        secret=APP_PASSWORD,
    )


def run_seed(
    seed: int, root: Path, postgres: Any = None, keep: bool = False, kafka: Any = None
) -> Outcome:
    """One scenario in `root/seed-N` (deleted after an outcome other than a defect, unless
    `keep`). `postgres`: a tests.services.PostgresServer, `kafka`: a started KafkaBroker, needed
    by the seeds that draw them. The disk-full fault's state dir is on a tmpfs mounted for the
    scenario (as root: tests/load/disks.py)."""
    scenario = plan(seed)
    workdir = root / f"seed-{seed}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    if scenario.sink == "postgresql" and postgres is None:
        raise RuntimeError(f"seed {seed} writes into PostgreSQL; none is running")
    if uses_kafka(scenario) and kafka is None:
        raise RuntimeError(f"seed {seed} reads or writes a Kafka topic; no broker is running")
    with contextlib.ExitStack() as stack:
        disk = None
        if scenario.disk_full_kib:
            from tests.chaos.disk_full import ROOM_KIB
            from tests.load.disks import SmallDisk

            disk = stack.enter_context(SmallDisk(workdir / "disk", ROOM_KIB))
        sink = make_sink(scenario, workdir, postgres, kafka, disk.path if disk else None)
        outcome = execute(scenario, workdir, sink, kafka, disk)
    if outcome.verdict != "defect" and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return outcome


def run_seeds(seeds: Iterable[int], root: Path | None = None, keep: bool = False) -> list[Outcome]:
    """Seeds one after the other, with a throwaway PostgreSQL and a Kafka broker (and Spark's
    Kafka connector) started once when one needs them."""
    seeds = list(seeds)
    root = root or Path(tempfile.mkdtemp(prefix="slipstream-chaos-"))
    found: list[Outcome] = []
    with contextlib.ExitStack() as stack:
        postgres = kafka = None
        if any(plan(s).sink == "postgresql" for s in seeds):
            postgres = started(stack, "postgres")
        if any(uses_kafka(plan(s)) for s in seeds):
            kafka = started(stack, "kafka")
        if any(plan(s).sink == "delta" for s in seeds):
            outputs.delta_python()  # before the first seed: a missing 4.2 line stops nothing midway
        for seed in seeds:
            found.append(run_seed(seed, root, postgres, keep, kafka))
            print(found[-1].line(), flush=True)
    return found


def uses_kafka(scenario: Scenario) -> bool:
    return scenario.input == "kafka" or scenario.sink == "kafka"


def started(stack: contextlib.ExitStack, service: str) -> Any:
    """A throwaway service of tests/services.py, stopped when `stack` closes."""
    from tests.services import kafka_connector, running_kafka, running_postgres

    server = stack.enter_context(running_postgres() if service == "postgres" else running_kafka())
    if isinstance(server, str):
        raise RuntimeError(f"{service} could not start: {server}")
    if service == "kafka" and (reason := kafka_connector()) is not None:
        raise RuntimeError(f"Spark's Kafka connector cannot be had: {reason}")
    return server


def report(found: list[Outcome], command: str) -> str:
    """The campaign's report, in Markdown."""
    combos = Counter(
        f"{o.scenario.pipeline}{' from kafka' if o.scenario.input == 'kafka' else ''} into "
        f"{o.scenario.sink}"
        for o in found
    )
    records = sum((o.model for o in found), Counter())
    lines = [
        f"- command: `{command}`",
        f"- scenarios: {len(found)} ({tally(combos)}), {sum(o.runs for o in found)} runs of "
        f"the CLI, {sum(o.seconds for o in found) / 60:.0f} min",
        f"- records landed: {records['lines']:,} ({records['malformed']:,} malformed, "
        f"{records['late']:,} late)",
        f"- faults injected: {tally(kinds(o.injected for o in found))}",
    ]
    missed = kinds(o.missed for o in found)
    if missed:
        lines.append(f"- planned, not injected (the run ended first): {tally(missed)}")
    lines.append(f"- outcomes: {tally(Counter(o.verdict for o in found))}")
    refusals = Counter(r for o in found for r in o.refusals)
    if refusals:
        lines.append(f"- refusals, each followed by its way out: {tally(refusals)}")
    noted = Counter(n for o in found for n in o.notes)
    if noted:
        lines.append(f"- notes: {tally(noted)}")
    for o in found:
        if o.verdict == "defect":
            lines.append(
                f"- **defect, seed {o.scenario.seed}**: {o.scenario.describe()}: "
                + "; ".join(o.defects)
                + f"; reproduce: `{reproduce(o.scenario.seed)}`"
            )
    lines.append("- seeds: " + " ".join(str(o.scenario.seed) for o in found))
    return "\n".join(lines) + "\n"


def kinds(lists: Iterable[list[str]]) -> Counter[str]:
    """Fault kinds without their details (`kill-random (inside a batch)` -> `kill-random`)."""
    return Counter(re.sub(r" \(.*", "", item) for items in lists for item in items)


def tally(counts: Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(counts.items())) or "none"
