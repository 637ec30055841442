"""A scenario is a pure function of its seed: `plan(seed)` draws the pipeline, the sink, the
input's size and dirt, and 1-3 faults, each after a few more files landed, from
`random.Random(seed)` alone. Running it is execute.py's job.

The input's kind and the faults that came with it (a Kafka topic and a broker restart, a file
appended after its batch read it, a file landed late) are drawn after that, from a second stream
of the same seed (`random.Random(f"{seed}:input")`): the first stream draws exactly what it drew
before they existed, so a seed whose second draw adds nothing keeps its plan (about half of
them, the suite's fixed seed among them), and the others keep theirs with one fault more.

The sink and the disk are drawn last, from a third stream (`random.Random(f"{seed}:output")`),
the same way: about one seed in five writes into a Kafka topic instead of its first stream's
sink (its kills inside a database's transaction become random kills: Kafka has no
transaction), and about one in five has the disk-full fault (the state dir on a tmpfs that is
left a few KiB before the final run). Last, about one seed in six of those that do not write into
Kafka writes into a Delta Lake table instead (update mode, MERGE with Delta's idempotent
transaction options; the CLI runs on the Spark 4.2 line, `.venv-delta`). The others, the fixed
seed among them, keep their plan."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

#: what each pipeline can write into (parquet is an append-mode file sink: mobile's finalised
#: windows; wordcount has no watermark, so no append mode)
SINKS = {"mobile": ("sqlite", "postgresql", "parquet"), "wordcount": ("sqlite", "postgresql")}
PIPELINES = ("mobile", "mobile", "wordcount")  # mobile twice: its model covers dirt and windows

#: kill-random: SIGKILL a seeded delay after a batch started (a new offsets file);
#: kill-in-sink / kill-after-write: the process SIGKILLs itself inside the sink's transaction,
#: or after the sink committed and before the checkpoint did (databases only);
#: sigint: Ctrl-C once a batch committed; damage: a checkpoint file cut or garbled before the
#: next run; window: the next run changes --window (mobile only; its state is refused)
KILLS = ("kill-random", "kill-in-sink", "kill-after-write")
FAULTS = (*KILLS, "sigint", "damage", "window")
#: how often each is drawn: random kills and damaged files the most (the widest spaces of moments
#: and of files)
WEIGHTS = {"kill-random": 2, "kill-in-sink": 1, "kill-after-write": 1, "sigint": 1, "damage": 2,
           "window": 1}  # fmt: skip
NEED_HISTORY = ("damage", "window")
DAMAGE_TARGETS = ("offsets", "commits", "sources", "build-record")
DAMAGE_HOW = ("empty", "header-only", "garbled")

#: drawn from the second stream: append: lines appended to a file a committed batch read
#: (files only); late-file: a file held back until LATE_AFTER later ones landed, so that its
#: records are older than the watermark (mobile, files); broker: the Kafka broker stopped
#: and started again (kafka only), `between` runs, `during` one (down for a drawn while, the run
#: lives on), or `kill` (the run SIGKILLed while the broker is down, then the broker back)
INPUT_FAULTS = ("append", "late-file", "broker")
BROKER_HOW = ("between", "during", "kill")
LATE_AFTER = 4
#: the second stream's choices: nothing added (the plan of before), Kafka input with a broker
#: restart, an appended file, a file landed late
EXTRAS = {"none": 10, "kafka": 5, "append": 3, "late-file": 2}

#: drawn from the third stream, each independently: the Kafka sink instead of the first
#: stream's (Spark's Kafka sink, at-least-once: the topic is read back, the latest value of each
#: key wins), and the disk-full fault (the state dir on a tmpfs, left DISK_FULL_KIB KiB of room
#: before the final run: DISK_FULL, the disk grown, the same command)
KAFKA_SINK_SHARE = 0.2
DISK_FULL_SHARE = 0.2
DISK_FULL_KIB = (16, 64)
#: drawn after those: a Delta table (sinks/delta.py, update mode) instead of a database or
#: Parquet; its kills inside the sink land before Delta's commit, or after it and before Spark's
DELTA_SINK_SHARE = 1 / 6


@dataclass(frozen=True)
class Fault:
    kind: str
    land: int  # files landed just before the faulty run
    delay_s: float = 0.0  # kill-random: after the batch started
    ahead: int = 0  # kill-in-sink/after-write: this many batches after the next
    target: str = ""  # damage: which file of the output's checkpoint
    how: str = ""  # damage: empty, header-only, garbled; broker: between, during, kill

    def describe(self) -> str:
        detail = {
            "kill-random": f" {self.delay_s:.2f}s into a batch",
            "kill-in-sink": f" at the next batch + {self.ahead}",
            "kill-after-write": f" at the next batch + {self.ahead}",
            "damage": f" {self.target} {self.how}",
            "window": " 40s instead of 20s",
            "append": " to a file read",
            "late-file": f" held back for {LATE_AFTER} files",
            "broker": f" {self.how}" + (f" down {self.delay_s:.2f}s" if self.delay_s else ""),
        }.get(self.kind, "")
        return f"{self.kind}{detail} (after {self.land} more files)"


@dataclass(frozen=True)
class Scenario:
    seed: int
    pipeline: str
    sink: str
    files: int  # files generated in all; those no fault landed come before the final run
    data_seed: int
    faults: tuple[Fault, ...] = field(default_factory=tuple)
    input: str = "files"  # or kafka: the files' records produced to a topic instead
    #: the disk-full fault: the state dir on a tmpfs left this much room before the final run
    disk_full_kib: int = 0

    def describe(self) -> str:
        steps = "; ".join(f.describe() for f in self.faults)
        if self.disk_full_kib:
            steps += f"; disk-full before the final run ({self.disk_full_kib} KiB left)"
        source = " from kafka" if self.input == "kafka" else ""
        return (
            f"seed {self.seed}: {self.pipeline}{source} into {self.sink}, {self.files} files; "
            f"{steps}"
        )


def plan(seed: int) -> Scenario:
    rng = random.Random(seed)
    pipeline = rng.choice(PIPELINES)
    sink = rng.choice(SINKS[pipeline])
    files = rng.randint(8, 11)
    data_seed = rng.randrange(1_000_000)
    kinds = [k for k in FAULTS if _fits(k, pipeline, sink)]
    faults = []
    landed = 0
    for n in range(rng.randint(1, 3)):
        # a damaged file or a changed window needs a checkpoint that has run: never first
        fit = [k for k in kinds if n or k not in NEED_HISTORY]
        kind = rng.choices(fit, [WEIGHTS[k] for k in fit])[0]
        land = rng.randint(1, 2)
        if landed + land > files - 1:  # at least one file is left for the final run
            break
        landed += land
        faults.append(
            Fault(
                kind,
                land,
                delay_s=round(rng.uniform(0.0, 2.0), 2) if kind == "kill-random" else 0.0,
                ahead=rng.randint(0, 1) if kind in KILLS[1:] else 0,
                target=rng.choice(DAMAGE_TARGETS) if kind == "damage" else "",
                how=rng.choice(DAMAGE_HOW) if kind == "damage" else "",
            )
        )
    return output(extend(Scenario(seed, pipeline, sink, files, data_seed, tuple(faults))))


def extend(scenario: Scenario) -> Scenario:
    """The second stream's draw: the input's kind, and one input fault inserted at a drawn
    place of the first stream's schedule (landing one more file when the budget allows)."""
    rng = random.Random(f"{scenario.seed}:input")
    extra = rng.choices(list(EXTRAS), list(EXTRAS.values()))[0]
    if extra == "none":
        return scenario
    if extra == "late-file" and scenario.pipeline != "mobile":
        extra = "append"  # wordcount has no watermark: a late file is only a file
    kind = "broker" if extra == "kafka" else extra
    faults = list(scenario.faults)
    at = rng.randint(0, len(faults))
    land = 1 if sum(f.land for f in faults) + 1 < scenario.files else 0
    if (
        kind == "late-file"
        and scenario.files - sum(f.land for f in faults[:at]) - land <= LATE_AFTER
    ):
        at = 0  # a file held back is late by LATE_AFTER files: that many must follow it
    how = rng.choice(BROKER_HOW) if kind == "broker" else ""
    delay = round(rng.uniform(0.5, 5.0), 2) if how == "during" else 0.0
    faults.insert(at, Fault(kind, land, delay_s=delay, how=how))
    source = "kafka" if extra == "kafka" else "files"
    return replace(scenario, faults=tuple(faults), input=source)


def output(scenario: Scenario) -> Scenario:
    """The third stream's draw: the Kafka sink instead of the drawn one (a kill inside a
    database's transaction, or after its commit, becomes a random kill with a drawn delay), and
    the disk-full fault before the final run; then, drawn last so that the draws before it
    stay, a Delta table instead of a database or Parquet."""
    rng = random.Random(f"{scenario.seed}:output")
    kafka = rng.random() < KAFKA_SINK_SHARE
    full = rng.random() < DISK_FULL_SHARE
    kib = rng.randint(*DISK_FULL_KIB)
    if rng.random() < DELTA_SINK_SHARE and not kafka:
        scenario = replace(scenario, sink="delta")
    if kafka:
        faults = tuple(
            replace(f, kind="kill-random", ahead=0, delay_s=round(rng.uniform(0.0, 2.0), 2))
            if f.kind in KILLS[1:]
            else f
            for f in scenario.faults
        )
        scenario = replace(scenario, sink="kafka", faults=faults)
    return replace(scenario, disk_full_kib=kib) if full else scenario


def _fits(kind: str, pipeline: str, sink: str) -> bool:
    if kind in KILLS[1:]:
        return sink != "parquet"  # the fault points are the database sinks' batch writer's
    if kind == "window":
        return pipeline == "mobile"
    return True
