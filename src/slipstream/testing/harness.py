"""The public test harness: test your pipelines the way slipstream tests its own.

    from slipstream.testing import PipelineHarness, session

    spark = session()                      # one per test session (a pytest fixture)
    with PipelineHarness(spark, "mobile", tmp_path, sink="collect", mode="update",
                         window="5m") as h:   # settings, params and inputs by name
        h.feed(['{"id": "p1", "action": "open", "ts": "2018-03-02T10:02:33"}'])
        rows = h.process()                 # rows the sink received in that batch
        table = h.results()                # the sink's table so far

Every run records its events in `workdir/state/events/PIPELINE.jsonl`, like a CLI run;
`handlers=[...]` adds listener handlers (metrics, your own).

Input is fed as files written atomically into a landing folder (one per stream input:
`feed(lines, input="clicks")`); `process()` runs until the queries are idle
(`processAllAvailable`), never by sleeping. `sink="collect"` records what each
micro-batch delivered, which is what output modes are about.

Event time batch by batch, several inputs (`max_files_per_trigger=1`: one file per input per
micro-batch):

    with PipelineHarness(spark, "ads", tmp_path, catalog=csv, max_files_per_trigger=1) as h:
        h.step(impressions=[{...}], clicks=[{...}])   # one batch of each input, run
        h.watermark("ad_impressions_outcome")         # the event-time watermark it reached
        h.state_rows("ad_impressions_outcome")        # rows its state operators hold

A stateful processor (transformWithState) with its clocks set by hand, no query at all:

    clock = ProcessorClock(StatusProcessor(3_600_000), time="event", event_time="ts")
    clock.feed("u1", [{"action": "open", "ts": t0}])   # rows it emits
    clock.watermark(t0 + timedelta(hours=1))           # timers due fire: their rows
    clock.value_state("status", "u1")                  # None once cleared"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import TimestampType

from slipstream.api import Pipeline
from slipstream.core.closing import StartStop
from slipstream.core.files import write_atomically
from slipstream.core.specs import SinkSpec
from slipstream.monitor.events import batch_executed
from slipstream.monitor.listener import Handler
from slipstream.pipelines import get_pipeline
from slipstream.runtime.bind import prepare
from slipstream.runtime.launch import launch
from slipstream.runtime.partitions import NO_DATA_BATCHES
from slipstream.runtime.run import Run
from slipstream.settings.config import load_settings
from slipstream.settings.session import build_session
from slipstream.sinks.base import FAULT_ENV, BatchInfo, BatchSink, Sink, with_iso_timestamps
from slipstream.sinks.registry import sink_class
from slipstream.sinks.sqlite import read_table


def fault(point: str, batch_id: int) -> dict[str, str]:
    """Environment for a subprocess that SIGKILLs itself at `point` of batch `batch_id`.

    Points: `before-write` (batch computed, nothing written), `before-commit` (rows and ledger
    written, transaction not committed), `after-write` (sink committed, Spark's checkpoint commit
    not yet written)."""
    return {FAULT_ENV: f"{point}@{batch_id}"}


def session(
    cores: int = 2,
    conf: Mapping[str, str] | None = None,
    kafka: bool = False,
    jdbc: Iterable[str] = (),
    delta: bool = False,
) -> SparkSession:
    """A local SparkSession for tests: slipstream's defaults, small shuffles, quiet logs;
    `kafka`: with Spark's Kafka connector; `jdbc`: with the JDBC drivers of the real-time
    database writer for these sinks (sqlite, postgresql; session.build_session); `delta`: with
    Delta Lake (the Spark 4.2 line only: DELTA_UNAVAILABLE otherwise)."""

    test_conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.noDataProgressEventInterval": "1000",
        **dict(conf or {}),
    }
    return build_session(
        f"local[{cores}]",
        test_conf,
        app_name="slipstream-tests",
        log_level="ERROR",
        kafka=kafka,
        jdbc=[d for k in jdbc if (d := sink_class(k).jdbc) is not None],
        delta=delta,
    )


def article_views_db(path: Path, rows: Iterable[Sequence[Any]]) -> Path:
    """A SQLite file with trending's `article_views` table, as its sink writes it, holding
    `rows`: for tests (and benchmarks) of the read side, `slipstream.tools.serving.trending`."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE article_views (window_start TEXT, window_end TEXT, article_id TEXT, "
            "title TEXT, section TEXT, views BIGINT, in_catalog BOOLEAN, "
            "PRIMARY KEY (window_start, article_id))"
        )
        conn.executemany("INSERT INTO article_views VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return path


class CollectSink(BatchSink):
    """Records the rows of every micro-batch, by batch id (timestamps as ISO text). Tests only:
    it collects each batch to the driver."""

    def __init__(self) -> None:
        super().__init__(SinkSpec("memory"))
        self.batches: dict[int, list[dict[str, Any]]] = {}

    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        rows = [r.asDict() for r in with_iso_timestamps(batch).collect()]
        self.batches[info.batch_id] = rows

    def describe(self, ctx: Any = None) -> str:
        return "collect (test sink: records every batch)"


class PipelineHarness(StartStop):
    """Run a pipeline over a landing folder you feed, batch by batch."""

    def __init__(
        self,
        spark: SparkSession | Callable[[], SparkSession],
        pipeline: str | Pipeline,
        workdir: Path,
        *,
        sink: str | Sink = "collect",
        handlers: Sequence[Handler] = (),
        **settings: Any,
    ) -> None:
        """`settings` are run settings (`mode`, `trigger`, ...), the pipeline's parameters
        (`window="5m"`) and its static inputs (`catalog=PATH`), by name. Each stream input
        lands in `workdir/input` (one stream) or `workdir/input/NAME` (several).

        `spark` is a session, or what makes one when the run starts (`session`, uncalled):
        then the pipeline, its settings and every check that needs no plan are bound here,
        before any JVM starts, so a configuration error fails the test in about a second."""
        self._spark = spark
        self.pipeline = get_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
        self.workdir = Path(workdir)
        streams = [i.name for i in self.pipeline.stream_inputs()]
        root = self.workdir / "input"
        self.inputs = {n: root / n if len(streams) > 1 else root for n in streams}
        for folder in self.inputs.values():
            folder.mkdir(parents=True, exist_ok=True)
        self.input = self.inputs[streams[0]]  # the first stream's landing folder
        self.collector: CollectSink | None = None
        self.handlers = list(handlers)  # listener handlers, e.g. SlipstreamMetrics(...).handle
        sink_obj: Sink | None = None
        params = {p.name: settings.pop(p.name) for p in self.pipeline.params if p.name in settings}
        paths: dict[str, Any] = {n: str(p) for n, p in self.inputs.items()}
        for spec in self.pipeline.inputs:
            if spec.static and spec.name in settings:
                paths[spec.name] = str(settings.pop(spec.name))
        flags: dict[str, Any] = {
            "source": "files",
            "input": [f"{n}={p}" for n, p in paths.items()],
            "state_dir": self.workdir / "state",
            **settings,
        }
        # each step runs the batch of no data its new watermark calls for (Spark's rule), so
        # late rows are judged by the watermark every batch before reached; a live `slipstream
        # run` skips it for upserted outputs (runtime/partitions.py); `conf={NO_DATA_BATCHES:
        # "false"}` skips it for every query
        flags["conf"] = {NO_DATA_BATCHES: "true", **dict(flags.get("conf") or {})}
        if isinstance(sink, Sink):
            sink_obj = sink
        elif sink == "collect":
            self.collector = sink_obj = CollectSink()
        else:
            flags["sink"] = sink
        self.settings = load_settings(self.pipeline.name, flags, environ={}, params=params)
        self.prepared = prepare(self.settings, self.pipeline, sink=sink_obj)
        self.run: Run | None = None
        self._files = itertools.count()
        self._seen_batches: set[int] = set()
        self._last_mtime = max(
            (p.stat().st_mtime for f in self.inputs.values() for p in f.iterdir() if p.is_file()),
            default=0.0,
        )

    @property
    def spark(self) -> SparkSession:
        """The session the run uses: made on first use when the harness was given a factory."""
        if callable(self._spark) and not hasattr(self._spark, "readStream"):
            self._spark = self._spark()  # a factory (a Connect session is no subclass)
        return cast(SparkSession, self._spark)

    def start(self) -> PipelineHarness:
        """Start the run on the test's session, through the lifecycle every command uses
        (runtime/launch.py): no servers, no signal handler, the session kept at the end."""
        self._launch = contextlib.ExitStack()
        launched = self._launch.enter_context(
            launch(
                self.prepared,
                io.StringIO(),
                origin="harness",
                handlers=self.handlers,
                spark=self.spark,
                starting=None,
            )
        )
        self.run = launched.run
        return self

    def feed(
        self, lines: Iterable[str] | str, name: str | None = None, *, input: str | None = None
    ) -> Path:
        """Land one file of lines (atomically) for a stream input (default: the first). The
        next `process()` sees it."""
        if isinstance(lines, str):
            lines = lines.splitlines()
        bound = self.prepared.inputs[input or next(iter(self.inputs))]
        folder = self.inputs[bound.name]
        if name is None:
            # unique across harnesses sharing a landing folder: Spark reads a path only once
            index = next(self._files)
            while any(folder.glob(f"batch-{index:05d}.*")):
                index = next(self._files)
            name = f"batch-{index:05d}.{bound.binding.format}"
        elif (folder / name).exists():
            raise FileExistsError(f"{name} already landed; Spark would not read it again")
        # Spark takes new files in modification-time order (ms resolution): make it feed order.
        # The time is set before the file appears: a running query may list it at once, and its
        # file source keeps the listed time for files it has not read yet.
        stamp = max(time.time(), self._last_mtime + 0.01)
        self._last_mtime = stamp
        return write_atomically(folder, name, lines, mtime=stamp)

    def process(self) -> list[dict[str, Any]]:
        """Run until idle; return the rows the collect sink received since the last call."""
        assert self.run is not None, "call start() first"
        self.run.process_all_available()
        if self.collector is None:
            return []
        new = sorted(set(self.collector.batches) - self._seen_batches)
        self._seen_batches.update(new)
        return [row for b in new for row in self.collector.batches[b]]

    def step(self, **records: Iterable[Mapping[str, Any] | str]) -> list[dict[str, Any]]:
        """Land one file per named input (records as dicts, or JSON lines) and run until idle:
        with `max_files_per_trigger=1`, one micro-batch of each input, then whatever no-data
        batch the new watermark calls for. Returns the rows the collect sink received."""
        for name, batch in records.items():
            self.feed([r if isinstance(r, str) else json.dumps(r) for r in batch], input=name)
        return self.process()

    def watermark(self, output: str | None = None) -> datetime | None:
        """The event-time watermark an output's query has reached (None before it has one)."""
        progress = self._last_progress(output)
        text = (progress or {}).get("eventTime", {}).get("watermark")
        if not text or text.startswith("1970-01-01T00:00:00"):
            return None
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    def state_rows(self, output: str | None = None) -> int:
        """Rows held by an output query's state operators after its last batch."""
        progress = self._last_progress(output) or {}
        return sum(int(op["numRowsTotal"]) for op in progress.get("stateOperators", []))

    def progress(self, output: str | None = None) -> list[dict[str, Any]]:
        """Spark's progress of each batch an output's query ran, oldest first, as far back as
        Spark keeps it (`spark.sql.streaming.numRecentProgressUpdates`, 100 by default): not
        its idle reports, which `recentProgress` also holds (0 rows, the next batch's id) when
        the query waited longer than `spark.sql.streaming.noDataProgressEventInterval`."""
        assert self.run is not None, "call start() first"
        query = self.run.queries[output or self.prepared.primary.name]
        return [p for p in query.recentProgress if batch_executed(p)]

    def _last_progress(self, output: str | None) -> dict[str, Any] | None:
        ran = self.progress(output)
        return ran[-1] if ran else None

    def results(self, output: str | None = None) -> list[dict[str, Any]]:
        """An output's table so far (sqlite or files; default: the first output), as dicts."""
        bound = self.prepared.outputs[output] if output else self.prepared.primary
        sink, ctx = bound.sink, bound.ctx
        if sink.spec.kind == "sqlite":
            return read_table(sink.path, ctx.table)  # type: ignore[attr-defined]
        frame = sink.read(self.spark, ctx)
        if frame is None:
            return []
        return [r.asDict() for r in with_iso_timestamps(frame).collect()]

    @property
    def totals(self) -> dict[str, dict[str, Any]]:
        assert self.run is not None
        return self.run.accounts()

    def stop(self) -> None:
        if self.run is not None:
            self._launch.close()
            self.run = None


Moment = datetime | int  # an aware datetime, or epoch milliseconds
_TS = TimestampType()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ms(moment: Moment) -> int:
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise ValueError(f"{moment!r} has no time zone; give an aware datetime (UTC)")
        return int(moment.timestamp() * 1000)
    return int(moment)


class ProcessorClock:
    """A stateful processor (transformWithState, row mode) driven by hand: feed a key's rows,
    move the watermark or the processing-time clock, see timers fire and state change. Built
    on Spark's TwsTester; no query, no Spark session, no sleep.

    `time`: "event" (timers fire as `watermark()` passes them; rows at or before the watermark
    are dropped as late, as in a query), "processing" (timers fire as `clock()` passes them)
    or "none". `event_time`: the rows' event-time column, for "event". Rows go in as dicts
    or Rows, with aware datetimes; rows come out as dicts, timestamps as aware UTC datetimes.
    """

    def __init__(
        self,
        processor: StatefulProcessor,
        *,
        time: Literal["event", "processing", "none"] = "event",
        event_time: str | None = None,
        mode: Literal["append", "update"] = "append",
    ) -> None:
        from pyspark.sql.streaming.tws_tester import TwsTester

        if time == "event" and not event_time:
            raise ValueError("time='event' needs event_time=COLUMN, the rows' event-time column")
        modes = {"event": "EventTime", "processing": "ProcessingTime", "none": "None"}
        extractor = None
        if event_time:
            column = event_time
            extractor = lambda row: _TS.toInternal(row[column]) // 1000  # noqa: E731 - TwsTester's
        self.tester = TwsTester(
            processor,
            timeMode=modes[time],
            outputMode=mode.capitalize(),
            eventTimeExtractor=extractor,
        )

    def feed(self, key: Any, rows: Iterable[Mapping[str, Any] | Row]) -> list[dict[str, Any]]:
        """One key's rows in one batch: what the processor emits for them."""
        given = [r if isinstance(r, Row) else Row(**_naive(dict(r))) for r in rows]
        return _out(self.tester.test(key, given))

    def watermark(self, to: Moment) -> list[dict[str, Any]]:
        """Move the event-time watermark (forward only): the rows of the timers it fires."""
        return _out(self.tester.setWatermark(_ms(to)))

    def clock(self, to: Moment) -> list[dict[str, Any]]:
        """Move the processing-time clock (forward only): the rows of the timers it fires."""
        return _out(self.tester.setProcessingTime(_ms(to)))

    def value_state(self, name: str, key: Any) -> tuple[Any, ...] | None:
        return self.tester.peekValueState(name, key)

    def map_state(self, name: str, key: Any) -> dict[Any, Any]:
        return self.tester.peekMapState(name, key)


def _naive(values: dict[str, Any]) -> dict[str, Any]:
    """Aware datetimes as the naive local datetimes Spark hands a row-mode processor."""
    return {
        k: _TS.fromInternal(_ms(v) * 1000) if isinstance(v, datetime) else v
        for k, v in values.items()
    }


def _out(rows: Iterable[Row]) -> list[dict[str, Any]]:
    return [
        {
            k: _EPOCH + timedelta(microseconds=_TS.toInternal(v)) if isinstance(v, datetime) else v
            for k, v in row.asDict().items()
        }
        for row in rows
    ]
