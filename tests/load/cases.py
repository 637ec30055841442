"""The harness's cases: a built-in pipeline, its generated input and a sink, run with
`slipstream run` in a subprocess (available-now), and judged against an independent model.

- `Chaos` cases reuse the fault campaign's workloads and judge (tests/chaos/) with no fault:
  mobile (a windowed aggregation with a watermark; dirt, late and duplicated records) and
  wordcount (an aggregation without one), one micro-batch per generated file, into SQLite,
  PostgreSQL or Parquet; the sink, the quarantine and the summary's equation are checked.
- `Activity`: transformWithState (the state API whose driver-side Python worker must connect
  back within Spark's fixed 10 s) over the activity generator's files in one batch, its three
  tables checked against the replay of tests/spark/pipelines/test_activity.py.
- `Crash`: the crash suite's trending and iot_steps, with no kill, against its pandas tables.
- tests/load/streams.py: sensors from files and from a Kafka topic, ads and temperature_load.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from tests.chaos import execute as chaos_execute
from tests.chaos.campaign import make_sink
from tests.chaos.scenario import Scenario
from tests.load.base import DATABASES, RUN_TIMEOUT_S, Case, IntoSink, Result, run_slipstream
from tests.load.streams import IntoKafka, Joins, Sensors


@dataclass
class Chaos(IntoSink):
    seed: int = 45

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        scenario = Scenario(self.seed, self.pipeline, self.sink, files=8, data_seed=self.seed)
        with DATABASES:
            sink = make_sink(scenario, workdir, postgres)
        # the campaign's bound on a run is for a machine that is not held busy
        outcome = chaos_execute.execute(scenario, workdir, sink, timeout_s=RUN_TIMEOUT_S)
        result = Result(self.name, outcome.verdict == "exact", outcome.seconds, outcome.defects)
        result.log = str(workdir)
        return result


class Activity(Case):
    name = "activity into sqlite"

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        from slipstream.tools.generators import activity as generator
        from slipstream.tools.generators.streams import generate
        from tests.helpers import landed_batches
        from tests.spark.pipelines.test_activity import SPEC, check_every_output

        result = Result(self.name)
        users = generator.Users(users=40, bursty=2, idle=timedelta(minutes=45), seed=SPEC.seed)
        report = generate(SPEC, users, workdir / "landing")
        batches = landed_batches(workdir / "landing", "actions")
        args = [
            "activity", "--input", str(workdir / "landing"), "--trigger", "available-now",
            "--sink", "sqlite", "--state-dir", str(workdir / "state"), "--master", "local[2]",
        ]  # fmt: skip
        if not run_slipstream(result, args):
            return result
        database = workdir / "state" / "slipstream.db"
        with sqlite3.connect(database) as conn:
            got: dict[str, Any] = {
                name: pd.read_sql_query(f"SELECT * FROM {name}", conn).to_dict("records")
                for name in ("user_status", "user_alerts", "user_sessions")
            }
        try:
            check_every_output(got, [[line for b in batches for line in b]], report.info["bursty"])
        except AssertionError as exc:
            result.fail(f"a table differs from the replay: {exc}"[:500])
        return result


@dataclass
class Crash(IntoSink):
    """A crash-suite pipeline (tests/e2e/crash/test_crash.py: trending, iot_steps, mobile) run
    once over its generated files, one micro-batch each, with no kill: the table against the
    suite's pandas computation."""

    files: int = 8

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        import random

        from tests.chaos.outputs import read_sqlite
        from tests.e2e.crash.test_crash import CASES as CRASH_CASES
        from tests.e2e.crash.test_crash import Chain, read_pg

        case = CRASH_CASES[self.pipeline]
        table = self.pipeline
        if self.sink == "sqlite":
            db = workdir / "results.db"
            args = ["--sink", f"sqlite:{db}", "--table", table, "--mode", "update"]
            read = lambda: read_sqlite(db, table)  # noqa: E731
        else:
            with DATABASES:
                database = postgres.create_database(
                    f"load_{self.pipeline}_{workdir.name}".replace("-", "_")
                )
            args = ["--sink", f"{postgres.url(database)}?parallel_rows=0", "--table", table,
                    "--mode", "update"]  # fmt: skip
            read = lambda: read_pg(postgres, database, table)  # noqa: E731
        chain = Chain(case, self.name, args, workdir, random.Random(f"load-{self.pipeline}"))
        result = Result(self.name)
        started = time.monotonic()
        chain.land(self.files)
        code = chain.wait(chain.start(), timeout=RUN_TIMEOUT_S)
        result.seconds = time.monotonic() - started
        result.log = chain.output_text()
        if code != 0:
            result.fail(f"exit {code}; see {chain.logs[-1]}")
            return result
        try:
            pd.testing.assert_frame_equal(
                case.normalise(read()), case.expected_table(chain.files), obj=self.name
            )
        except AssertionError as exc:
            result.fail(str(exc)[:500])
        return result


#: every case `make stress` runs; the suite's set is tests/e2e/load/
CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Activity(),
        Chaos("mobile", "postgresql"),
        Chaos("mobile", "sqlite"),
        Chaos("mobile", "parquet"),
        Chaos("wordcount", "sqlite"),
        Crash("trending", "postgresql"),
        Crash("iot_steps", "sqlite"),
        Sensors("sensors", "sqlite"),
        Joins("ads", "sqlite"),
        Joins("temperature_load", "postgresql"),
        IntoKafka("sensors", "sqlite"),
    )
}
