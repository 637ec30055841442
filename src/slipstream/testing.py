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
micro-batch delivered, which is what output modes are about."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from slipstream import runner
from slipstream.config import load_settings
from slipstream.generators.files import write_atomically
from slipstream.monitor.listener import Handler
from slipstream.pipelines import Pipeline, get_pipeline
from slipstream.sinks.base import BatchInfo, BatchSink, Sink, with_iso_timestamps
from slipstream.sinks.sqlite import read_table
from slipstream.specs import SinkSpec

FAULT_ENV = "SLIPSTREAM_FAULT"


def fault(point: str, batch_id: int) -> dict[str, str]:
    """Environment for a subprocess that SIGKILLs itself at `point` of batch `batch_id`.

    Points: `before-write` (batch computed, nothing written), `before-commit` (rows and ledger
    written, transaction not committed), `after-write` (sink committed, Spark's checkpoint commit
    not yet written)."""
    return {FAULT_ENV: f"{point}@{batch_id}"}


def session(cores: int = 2, conf: Mapping[str, str] | None = None) -> SparkSession:
    """A local SparkSession for tests: slipstream's defaults, small shuffles, quiet logs."""
    from slipstream.session import build_session

    test_conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.noDataProgressEventInterval": "1000",
        **dict(conf or {}),
    }
    return build_session(
        f"local[{cores}]", test_conf, app_name="slipstream-tests", log_level="ERROR"
    )


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


class PipelineHarness:
    """Run a pipeline over a landing folder you feed, batch by batch."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: str | Pipeline,
        workdir: Path,
        *,
        sink: str | Sink = "collect",
        handlers: Sequence[Handler] = (),
        **settings: Any,
    ) -> None:
        """`settings` are run settings (`mode`, `trigger`, ...), the pipeline's parameters
        (`window="5m"`) and its static inputs (`catalog=PATH`), by name. Each stream input
        lands in `workdir/input` (one stream) or `workdir/input/NAME` (several)."""
        self.spark = spark
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
        if isinstance(sink, Sink):
            sink_obj = sink
        elif sink == "collect":
            self.collector = sink_obj = CollectSink()
        else:
            flags["sink"] = sink
        self.settings = load_settings(self.pipeline.name, flags, environ={}, params=params)
        self.prepared = runner.prepare(self.settings, self.pipeline, sink=sink_obj)
        self.run: runner.Run | None = None
        self._files = itertools.count()
        self._seen_batches: set[int] = set()
        self._last_mtime = max(
            (p.stat().st_mtime for f in self.inputs.values() for p in f.iterdir() if p.is_file()),
            default=0.0,
        )

    def start(self) -> PipelineHarness:
        self.run = runner.start(self.spark, self.prepared, self.handlers, origin="harness")
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

    def feed_records(
        self,
        records: Iterable[Mapping[str, Any]],
        name: str | None = None,
        *,
        input: str | None = None,
    ) -> Path:
        return self.feed([json.dumps(r) for r in records], name, input=input)

    def process(self) -> list[dict[str, Any]]:
        """Run until idle; return the rows the collect sink received since the last call."""
        assert self.run is not None, "call start() first"
        self.run.process_all_available()
        if self.collector is None:
            return []
        new = sorted(set(self.collector.batches) - self._seen_batches)
        self._seen_batches.update(new)
        return [row for b in new for row in self.collector.batches[b]]

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
        return self.run.totals.by_query

    def stop(self) -> None:
        if self.run is not None:
            self.run.stop()
            self.run = None

    def __enter__(self) -> PipelineHarness:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
