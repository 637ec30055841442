"""Crash suite: real processes, SIGKILLed at seeded random moments, restarted from the same
checkpoint, over a stream of generated files. At the end every output equals an independent
computation over all the files: no row lost, none doubled.

One `CrashCase` per pipeline (its generator, its independent expected results and how to read its
outputs); the suite runs each case into SQLite, PostgreSQL and Parquet (the heavier cases
into the two databases), each with its own checkpoint, concurrently. Adding a pipeline is one
more CrashCase subclass in CASES.

Kills come in three kinds:
- `after-write`: SLIPSTREAM_FAULT makes the process SIGKILL itself after the sink committed a
  batch and before Spark committed it in the checkpoint (the window exactly-once is about); the
  suite checks the ledger has the batch and the commit log does not;
- `before-commit`: inside the sink's transaction (rows and ledger row written, not committed);
- `random`: once the process has started a new batch (an offsets file appeared), a seeded random
  delay, then SIGKILL from the test: inside a batch (offsets ahead of commits), in the sink, or
  between batches, wherever it lands. The classification of each kill is printed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from slipstream.core import spark_line
from slipstream.core.files import write_atomically
from slipstream.pipelines import get_pipeline
from tests.helpers import quarantine_records
from tests.services import APP_PASSWORD

REPO = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("SLIPSTREAM_CRASH_SEED", "20240917"))
PROCESS_TIMEOUT_S = 300
SPARK_ARGS = [
    "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2",
    # Short-lived processes: the C1 compiler alone starts Spark ~30% faster on 2 busy cores.
    "--conf", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
]  # fmt: skip

pytestmark = [pytest.mark.slow]


# --- the pipelines under test ------------------------------------------------------------------


FULL_PLANS = {
    "sqlite": ("after-write", "random", "before-commit"),
    "postgresql": ("random", "after-write", "before-commit"),
    "parquet": ("random", "random"),
}  # 8 kills: every kind in each database, random ones in all three
SHORT_PLANS = {
    "sqlite": ("after-write", "random"),
    "postgresql": ("random", "before-commit"),
}  # 4 kills, the databases only


class CrashCase:
    """A pipeline under the crash suite: how it runs (its flags, kill plans, files per run) and,
    in its subclass, its input generator and an independent computation of its results."""

    pipeline: str
    key: tuple[str, ...] = ()  # an output's key: written once, whatever the kills
    measure = ""  # the counted column, for the report
    archive = False  # the sqlite run also appends finalised rows to the archive output
    plans: dict[str, tuple[str, ...]] = FULL_PLANS
    files_per_cycle = (2, 4)
    min_kills = 7

    def args(self) -> list[str]:
        """Extra flags of `slipstream run`."""
        return []

    def make_file(self, rng: random.Random, index: int) -> list[str]:
        """The lines of input file `index`."""
        raise NotImplementedError

    def malformed(self, lines: list[str]) -> int:
        """How many lines of a file must be quarantined."""
        raise NotImplementedError

    def expected_table(self, files: list[Path]) -> pd.DataFrame:
        """Update mode: the final table over all the files."""
        raise NotImplementedError

    def expected_final(self, files: list[Path]) -> pd.DataFrame:
        """Append mode: the finalised rows only."""
        raise NotImplementedError

    def normalise(self, frame: pd.DataFrame) -> pd.DataFrame:
        """An output, typed and sorted like the expected tables."""
        raise NotImplementedError


class HeavyCase(CrashCase):
    """A pipeline heavier per batch than mobile: fewer kills keep the suite within minutes
    (mobile's run carries the 8 kills and every kind of them), more files per run, and the two
    databases only (mobile's run covers the Parquet sink; two processes on two cores, not
    three)."""

    plans = SHORT_PLANS
    min_kills = 4
    files_per_cycle = (3, 5)


MOBILE_T0 = datetime(2024, 1, 1, tzinfo=UTC)
ACTIONS = ("open", "close", "crash", "swipe")


class Mobile(CrashCase):
    pipeline = "mobile"
    key = ("window_start", "action")
    measure = "count"

    def make_file(self, rng: random.Random, index: int) -> list[str]:
        """File i holds events in [T0 + 4i min, T0 + 4i + 4 min): never later than the 10-minute
        watermark however the files are batched, so the final counts do not depend on batching.
        Some files carry malformed records (not JSON, a missing field, a bad timestamp)."""
        lines = []
        for n in range(rng.randint(15, 30)):
            ts = MOBILE_T0 + timedelta(minutes=4 * index, seconds=rng.uniform(0, 239.9))
            event = {"id": f"p{rng.randint(1, 9)}", "action": rng.choice(ACTIONS)}
            event["ts"] = ts.strftime("%Y-%m-%dT%H:%M:%S.%f") if n % 3 else ts.isoformat()
            lines.append(json.dumps(event))
        if index % 4 == 1:
            lines.insert(rng.randrange(len(lines)), "this is not json")
            lines.append(json.dumps({"id": "p1", "ts": MOBILE_T0.isoformat()}))  # no action
            lines.append(json.dumps({"id": "p1", "action": "open", "ts": "yesterday"}))
        return lines

    def malformed(self, lines: list[str]) -> int:
        bad = 0
        for line in lines:
            try:
                record = json.loads(line)
                datetime.fromisoformat(record["ts"])
                assert record["id"] and record["action"]
            except (ValueError, KeyError, AssertionError):
                bad += 1
        return bad

    @staticmethod
    def events(files: list[Path]) -> pd.DataFrame:
        """pandas over the raw files, sharing nothing with the pipeline's code."""
        records = []
        for path in files:
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                    ts = datetime.fromisoformat(record["ts"])
                except (ValueError, KeyError):
                    continue
                if record.get("id") and record.get("action"):
                    moment = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
                    records.append({"action": record["action"], "ts": moment})
        events = pd.DataFrame(records)
        events["window_start"] = pd.to_datetime(events["ts"], utc=True).dt.floor("10min")
        return events

    def expected_table(self, files: list[Path]) -> pd.DataFrame:
        counts = self.events(files).groupby(["window_start", "action"]).size()
        return self.normalise(counts.reset_index(name="count"))

    def expected_final(self, files: list[Path]) -> pd.DataFrame:
        """Append mode emits a window once the watermark (max event time - 10 min) passes its
        end."""
        events = self.events(files)
        watermark = events["ts"].max() - pd.Timedelta(minutes=10)
        counts = events.groupby(["window_start", "action"]).size().reset_index(name="count")
        closed = counts[counts["window_start"] + pd.Timedelta(minutes=10) <= watermark]
        return self.normalise(closed)

    def normalise(self, frame: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame(
            {
                "window_start": pd.to_datetime(frame["window_start"], utc=True),
                "action": frame["action"].astype(str),
                "count": frame["count"].astype("int64"),
            }
        )
        return out.sort_values(["window_start", "action"]).reset_index(drop=True)


# trending: files from its own generator (duplicates, out-of-order events, malformed lines,
# unknown articles), made never late however they are batched; expected results from
# tests/trending_reference.py, which shares no code with slipstream.
TRENDING_WINDOW, TRENDING_SLIDE = timedelta(minutes=10), timedelta(minutes=1)
TRENDING_WATERMARK = timedelta(minutes=10)


@cache
def trending_pool() -> tuple[Path, list[Path]]:
    """A catalog and 40 event files, generated once per test session."""
    import atexit
    import shutil
    import tempfile

    from slipstream.tools.generators.trending import TrendingSpec, generate, write_catalog

    root = Path(tempfile.mkdtemp(prefix="slipstream-crash-trending-"))
    atexit.register(shutil.rmtree, root, True)
    spec = TrendingSpec(
        articles=30, users=200, rate=1 / 3, events=40 * 60, file_every=timedelta(minutes=3),
        seed=SEED, start=datetime(2026, 1, 1, tzinfo=UTC), late=0.0, out_of_order=0.05,
        duplicates=0.03, malformed=0.02, unknown_article=0.02,
        # out-of-order events at most 5 minutes back: never late for the pipeline's 10 minutes
        watermark=timedelta(minutes=5),
    )  # fmt: skip
    catalog = write_catalog(root / "catalog.csv", spec)
    generate(spec, root / "files")
    return catalog, sorted((root / "files").iterdir())


def pooled_file(files: list[Path], index: int) -> list[str]:
    assert index < len(files), f"the pool holds {len(files)} files; make more"
    return files[index].read_text().splitlines()


TRENDING_COLUMNS = [
    "window_start", "window_end", "article_id", "title", "section", "views", "in_catalog",
]  # fmt: skip


class Trending(HeavyCase):
    pipeline = "trending"
    key = ("window_start", "article_id")
    measure = "views"
    archive = True

    def args(self) -> list[str]:
        return ["--input", f"catalog={trending_pool()[0]}"]

    def make_file(self, rng: random.Random, index: int) -> list[str]:
        return pooled_file(trending_pool()[1], index)

    def malformed(self, lines: list[str]) -> int:
        from tests.trending_reference import parse_line

        now = datetime.now(UTC)
        return sum(parse_line(line, now) is None for line in lines)

    @staticmethod
    def counted(files: list[Path]) -> list[dict]:
        from tests.trending_reference import counted_events

        batches = [path.read_text().splitlines() for path in files]
        events, stats = counted_events(batches, TRENDING_WATERMARK, datetime.now(UTC))
        assert stats["late"] == 0  # as generated: the result cannot depend on batch boundaries
        return events

    def expected_table(self, files: list[Path]) -> pd.DataFrame:
        from tests.trending_reference import article_views

        catalog = trending_pool()[0]
        rows = article_views(self.counted(files), catalog, TRENDING_WINDOW, TRENDING_SLIDE)
        return self.normalise(pd.DataFrame(sorted(rows, key=str), columns=TRENDING_COLUMNS))

    def expected_final(self, files: list[Path]) -> pd.DataFrame:
        """Finalised: the watermark (max event time - 10 min) has passed the window's end."""
        table = self.expected_table(files)
        events = self.counted(files)
        watermark = max(e["ts"] for e in events) - TRENDING_WATERMARK
        ends = pd.to_datetime(table["window_end"], utc=True)
        return table[ends <= watermark].reset_index(drop=True)

    def normalise(self, frame: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame(
            {
                "window_start": _iso(frame["window_start"]),
                "window_end": _iso(frame["window_end"]),
                "article_id": frame["article_id"].astype(str),
                "title": frame["title"].astype(object).where(frame["title"].notna(), None),
                "section": frame["section"].astype(object).where(frame["section"].notna(), None),
                "views": frame["views"].astype("int64"),
                "in_catalog": frame["in_catalog"].astype(bool),
            }
        )
        return out.sort_values(["window_start", "article_id"]).reset_index(drop=True)


def _iso(column: pd.Series) -> pd.Series:
    return pd.to_datetime(column, utc=True).dt.strftime("%Y-%m-%dT%H:%M:%SZ")


# iot_steps: files from its own generator (out-of-order records at most 5 minutes back, never
# late for the 10-minute watermark however they are batched; malformed lines; no duplicates,
# which the seed's query would count twice); expected sums from tests/stream_reference.py.
IOT_WINDOW, IOT_WATERMARK = timedelta(minutes=5), timedelta(minutes=10)


@cache
def iot_pool() -> list[Path]:
    import atexit
    import shutil
    import tempfile

    from slipstream.tools.generators import iot
    from slipstream.tools.generators.streams import StreamSpec, generate

    root = Path(tempfile.mkdtemp(prefix="slipstream-crash-iot-"))
    atexit.register(shutil.rmtree, root, True)
    spec = StreamSpec(
        duration=timedelta(minutes=120), seed=SEED, file_every=timedelta(minutes=3),
        out_of_order=0.1, late=0.0, duplicates=0.0, malformed=0.03,
    )  # fmt: skip
    generate(spec, iot.Devices(rate=0.5), root)
    return sorted(root.glob("device-*.jsonl"))


class IotSteps(HeavyCase):
    pipeline = "iot_steps"
    key = ("window_start",)
    measure = "num_steps"

    def make_file(self, rng: random.Random, index: int) -> list[str]:
        return pooled_file(iot_pool(), index)

    def malformed(self, lines: list[str]) -> int:
        from tests.stream_reference import iot_record

        now = datetime.now(UTC)
        return sum(iot_record(line, now) is None for line in lines)

    @staticmethod
    def records(files: list[Path]) -> list[dict]:
        from tests.stream_reference import iot_record

        now = datetime.now(UTC)
        lines = [line for path in files for line in path.read_text().splitlines()]
        return [r for r in map(lambda line: iot_record(line, now), lines) if r is not None]

    def expected_table(self, files: list[Path], final_only: bool = False) -> pd.DataFrame:
        from tests.stream_reference import step_sums

        records = self.records(files)
        sums = step_sums(records, IOT_WINDOW)
        frame = pd.DataFrame({"window_start": list(sums), "num_steps": list(sums.values())})
        frame["window_end"] = pd.to_datetime(frame["window_start"], utc=True) + IOT_WINDOW
        if final_only:
            watermark = max(r["timestamp"] for r in records) - IOT_WATERMARK
            frame = frame[frame["window_end"] <= watermark]
        return self.normalise(frame)

    def expected_final(self, files: list[Path]) -> pd.DataFrame:
        return self.expected_table(files, final_only=True)

    def normalise(self, frame: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame(
            {
                "window_start": _iso(frame["window_start"]),
                "window_end": _iso(frame["window_end"]),
                "num_steps": frame["num_steps"].astype("int64"),
            }
        )
        return out.sort_values(["window_start"]).reset_index(drop=True)


CASES: dict[str, CrashCase] = {case.pipeline: case for case in (IotSteps(), Mobile(), Trending())}


# --- one chain: a pipeline into one sink, killed and restarted ---------------------------------


@dataclass
class Kill:
    kind: str  # after-write | before-commit | random
    where: str  # what the checkpoint and the ledger say about the moment of death
    seconds: float


@dataclass
class Chain:
    """Runs `slipstream run` over and over on one checkpoint, killing it as planned."""

    case: CrashCase
    name: str
    sink_args: list[str]
    workdir: Path
    rng: random.Random
    ledger: Callable[[], set[int]] | None = None  # batch ids the sink committed
    env: dict[str, str] = field(default_factory=dict)
    kills: list[Kill] = field(default_factory=list)
    runs: int = 0
    files: list[Path] = field(default_factory=list)
    malformed: int = 0
    logs: list[Path] = field(default_factory=list)
    trigger: str = "available-now"

    def __post_init__(self) -> None:
        self.input = self.workdir / "input"
        self.input.mkdir(parents=True, exist_ok=True)
        self.checkpoint = self.workdir / "checkpoint"
        self.results = self.checkpoint / get_pipeline(self.case.pipeline).outputs[0].name

    def land(self, count: int) -> None:
        for _ in range(count):
            index = len(self.files)
            lines = self.case.make_file(self.rng, index)
            self.malformed += self.case.malformed(lines)
            self.files.append(write_atomically(self.input, f"events-{index:04d}.json", lines))

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "slipstream", "run", self.case.pipeline,
            "--input", str(self.input), "--checkpoint", str(self.checkpoint),
            "--state-dir", str(self.workdir / "state"), "--trigger", self.trigger,
            "--max-files-per-trigger", "1", *SPARK_ARGS, *self.case.args(), *self.sink_args,
        ]  # fmt: skip

    def start(self, fault: str | None = None) -> subprocess.Popen:
        env = {**os.environ, **self.env, "PYTHONPATH": str(REPO / "src")}
        env.pop("SLIPSTREAM_FAULT", None)
        if fault:
            env["SLIPSTREAM_FAULT"] = fault
        self.runs += 1
        log = self.workdir / f"run-{self.runs:02d}.log"
        self.logs.append(log)
        with open(log, "w") as out:
            return subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env)

    def batches(self, log: str) -> list[int]:
        folder = self.results / log
        return (
            sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())
            if folder.is_dir()
            else []
        )

    def last(self, log: str) -> int:
        ids = self.batches(log)
        return ids[-1] if ids else -1

    def wait(self, proc: subprocess.Popen, timeout: float = PROCESS_TIMEOUT_S) -> int:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(
                f"{self.name}: run did not finish in {timeout}s; see {self.logs[-1]}"
            ) from None

    def fault_kill(self, point: str) -> bool:
        """The process kills itself at `point` of the next batch. True if it died there."""
        batch = self.last("commits") + 1
        started = time.monotonic()
        code = self.wait(self.start(f"{point}@{batch}"))
        if code != -signal.SIGKILL:
            assert code == 0, f"{self.name}: exit {code}; see {self.logs[-1]}"
            return False  # nothing left to run, or the batch was a replay the ledger skipped
        assert batch not in self.batches("commits"), "the checkpoint committed a killed batch"
        where = "inside the batch"
        if point == "after-write" and self.ledger is not None:
            assert batch in self.ledger(), "after-write: the sink should hold the batch"
            where = "sink committed, checkpoint not"
        elif point == "before-commit" and self.ledger is not None:
            assert batch not in self.ledger(), "before-commit: the transaction must roll back"
            where = "inside the sink's transaction"
        self.kills.append(Kill(point, f"batch {batch}: {where}", time.monotonic() - started))
        return True

    def random_kill(self, delay_s: tuple[float, float] = (0.0, 1.5)) -> bool:
        """SIGKILL a seeded random delay after the process starts a new batch."""
        before = self.last("offsets")
        started = time.monotonic()
        proc = self.start()
        deadline = started + PROCESS_TIMEOUT_S
        while self.last("offsets") <= before and proc.poll() is None:  # bounded poll, not a sleep
            assert time.monotonic() < deadline, f"{self.name}: no batch started; {self.logs[-1]}"
            time.sleep(0.05)
        if proc.poll() is not None:
            assert proc.returncode == 0, f"{self.name}: exit {proc.returncode}; {self.logs[-1]}"
            return False
        time.sleep(self.rng.uniform(*delay_s))  # the experiment: where the kill lands
        if proc.poll() is not None:
            assert proc.returncode == 0, f"{self.name}: exit {proc.returncode}; {self.logs[-1]}"
            return False
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        offsets, commits = self.last("offsets"), self.last("commits")
        where = (
            f"inside batch {offsets} (offsets {offsets} > commits {commits})"
            if offsets > commits
            else f"between batches (after batch {commits})"
        )
        self.kills.append(Kill("random", where, time.monotonic() - started))
        return True

    def crash_loop(self, plan: list[str], files_per_cycle: tuple[int, int] = (2, 4)) -> None:
        """Land files, run, kill as planned; a kill that did not happen is retried once."""
        for kind in plan:
            for _attempt in range(2):
                self.land(self.rng.randint(*files_per_cycle))
                killed = self.fault_kill(kind) if kind != "random" else self.random_kill()
                if killed:
                    break

    def finish(self) -> None:
        """Land the last files and run to the end, undisturbed."""
        self.land(2)
        code = self.wait(self.start())
        assert code == 0, f"{self.name}: final run exit {code}; see {self.logs[-1]}"

    def output_text(self) -> str:
        return "\n".join(log.read_text(errors="replace") for log in self.logs)


def sqlite_ledger(path: Path) -> Callable[[], set[int]]:
    def read() -> set[int]:
        with sqlite3.connect(path) as conn:
            return {r[0] for r in conn.execute("SELECT batch_id FROM _slipstream_batches")}

    return read


def pg_ledger(server, database: str) -> Callable[[], set[int]]:
    def read() -> set[int]:
        return {r[0] for r in server.query(database, "SELECT batch_id FROM _slipstream_batches")}

    return read


def read_sqlite(path: Path, table: str) -> pd.DataFrame:
    with sqlite3.connect(path) as conn:
        return pd.read_sql_query(f'SELECT * FROM "{table}"', conn)


def read_pg(server, database: str, table: str) -> pd.DataFrame:
    import psycopg

    with psycopg.connect(server.admin_dsn(database)) as conn:
        cur = conn.execute(f'SELECT * FROM "{table}"')
        return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])


def read_committed_files(spark, directory: Path, fmt: str) -> pd.DataFrame:
    """A Spark file sink's output through its _spark_metadata log: files of batches that were
    killed before their commit are on disk but not in the log, and must not count."""
    return getattr(spark.read, fmt)(str(directory)).toPandas()


# --- the suite ---------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize("case_name", sorted(CASES))
def test_outputs_survive_sigkills_exactly_once(
    case_name: str, spark, postgres, pg_database: str, tmp_path: Path
) -> None:
    case = CASES[case_name]
    table = case.pipeline  # explicit --table, the same in every database
    db = tmp_path / "sqlite" / "results.db"
    pg_url = f"{postgres.url(pg_database)}?parallel_rows=0"  # stage from the executors
    archive = tmp_path / "sqlite" / "archive"
    sqlite_args = ["--sink", f"sqlite:{db}", "--table", table, "--mode", "update"]
    if case.archive:
        sqlite_args += ["--sink", f"archive=parquet:{archive}"]
    chains = {
        "sqlite": Chain(
            case, "sqlite", sqlite_args, tmp_path / "sqlite", random.Random(f"{SEED}-sqlite"),
            ledger=sqlite_ledger(db),
        ),
        "postgresql": Chain(
            case, "postgresql", ["--sink", pg_url, "--table", table, "--mode", "update"],
            tmp_path / "postgresql", random.Random(f"{SEED}-pg"),
            ledger=pg_ledger(postgres, pg_database),
        ),
        "parquet": Chain(
            case, "parquet", ["--sink", f"parquet:{tmp_path / 'parquet' / 'out'}"],
            tmp_path / "parquet", random.Random(f"{SEED}-parquet"),
        ),
    }  # fmt: skip
    plans, min_kills = case.plans, case.min_kills
    if spark_line.delta():
        # the 4.2 line's leg (the Makefile's DELTA_LEG) runs mobile as the crash suite's core
        # on that line: every kind of kill, into the two databases; the default line runs its
        # 8 kills and the Parquet chain
        plans, min_kills = SHORT_PLANS, HeavyCase.min_kills
    chains = {name: chain for name, chain in chains.items() if name in plans}
    started = time.monotonic()

    def drive(name: str) -> None:
        chain = chains[name]
        chain.crash_loop(list(plans[name]), case.files_per_cycle)
        chain.finish()

    with ThreadPoolExecutor(len(chains)) as pool:
        for future in [pool.submit(drive, name) for name in chains]:
            future.result()
    elapsed = time.monotonic() - started

    outputs = {
        "sqlite": read_sqlite(db, table),
        "postgresql": read_pg(postgres, pg_database, table),
    }
    if "parquet" in chains:
        outputs["parquet"] = read_committed_files(spark, tmp_path / "parquet" / "out", "parquet")
    finals = {"parquet"}
    if case.archive:
        outputs["sqlite archive"] = read_committed_files(spark, archive, "parquet")
        finals.add("sqlite archive")
    report = [f"crash suite {case.pipeline}, seed {SEED}, {elapsed:.0f}s"]
    for name, output in outputs.items():
        chain = chains[name.split()[0]]
        expected = (case.expected_final if name in finals else case.expected_table)(chain.files)
        got = case.normalise(output)
        m = case.measure
        report.append(
            f"  {name:<16} {len(chain.kills)} kills, {chain.runs} runs, {len(chain.files)} "
            f"files: {len(got)} rows, {m} total {got[m].sum()} vs expected {len(expected)} rows, "
            f"{expected[m].sum()}"
        )
        report += [
            f"      {k.kind:<13} {k.where} ({k.seconds:.1f}s after start)" for k in chain.kills
        ]
        assert not got.duplicated(list(case.key)).any(), f"{name}: a key written twice"
        pd.testing.assert_frame_equal(got, expected, obj=f"{name} output")
    for name, chain in chains.items():
        stream = get_pipeline(case.pipeline).stream_inputs()[0].name
        quarantined = quarantine_records(
            chain.workdir / "state" / "quarantine" / case.pipeline / stream
        )
        assert len(quarantined) == chain.malformed, f"{name}: quarantine not exactly-once"
        assert APP_PASSWORD not in chain.output_text() and "s3cret" not in chain.output_text()
    print("\n".join(report))
    kills = [k for chain in chains.values() for k in chain.kills]
    assert len(kills) >= min_kills, report
    kinds = {k.kind for k in kills}
    assert {"after-write", "before-commit", "random"} <= kinds, report
    assert any(k.kind == "random" and k.where.startswith("inside") for k in kills), report


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen, what: str) -> None:
    """Poll (bounded) until `condition` holds while `proc` runs: synchronisation on state."""
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while not condition():
        assert proc.poll() is None, f"the run exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.spark
@pytest.mark.postgres
def test_postgres_stopped_mid_stream_fails_loudly_and_loses_nothing(tmp_path: Path) -> None:
    from tests.services import running_postgres, unavailable

    with running_postgres() as server:  # its own server: this test stops it
        if isinstance(server, str):
            unavailable(server)
        database = server.create_database("restarted")
        url = f"{server.url(database)}?parallel_rows=0"
        chain = Chain(
            CASES["mobile"], "pg-restart", ["--sink", url, "--table", "mobile"], tmp_path,
            random.Random(SEED), trigger="default",
        )  # fmt: skip
        chain.land(3)
        proc = chain.start()
        wait_until(lambda: chain.last("commits") >= 1, proc, "two batches committed")
        server.stop("immediate")  # a crash of the database, mid-stream
        chain.land(2)
        code = chain.wait(proc)
        text = chain.output_text()
        assert code == 1, f"expected the query to fail; see {chain.logs[-1]}"
        failed = [line for line in text.splitlines() if "slipstream: the query failed" in line]
        assert failed and ("SINK_UNREACHABLE" in failed[0] or "SINK_WRITE_FAILED" in failed[0])
        assert f"127.0.0.1:{server.port}" in text and "fix:" in text
        assert APP_PASSWORD not in text and "s3cret" not in text
        server.start()
        chain.trigger = "available-now"
        chain.finish()  # the same command again, from the same checkpoint
        got = CASES["mobile"].normalise(read_pg(server, database, "mobile"))
        pd.testing.assert_frame_equal(got, CASES["mobile"].expected_table(chain.files))
        print(f"postgres restart: {len(got)} rows, count total {got['count'].sum()} == expected")


@pytest.mark.spark
def test_a_second_run_on_a_checkpoint_in_use_is_refused(tmp_path: Path) -> None:
    from slipstream.checkpoint.lifecycle import is_locked

    db = tmp_path / "results.db"
    chain = Chain(
        CASES["mobile"], "concurrent", ["--sink", f"sqlite:{db}"], tmp_path, random.Random(SEED),
        trigger="default",
    )  # fmt: skip
    chain.land(1)
    first = chain.start()  # runs until stopped
    try:
        # Its first batch started: runner.start holds the lock by then. (Polling is_locked
        # itself would take the free lock for an instant and could refuse the first run.)
        wait_until(lambda: chain.last("offsets") >= 0, first, "the first run's first batch")
        assert is_locked(chain.checkpoint)
        second = subprocess.run(
            chain.command(), capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert "CHECKPOINT_IN_USE" in second.stderr and f"pid {first.pid}" in second.stderr
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert not is_locked(chain.checkpoint)  # the kernel released it with the process
