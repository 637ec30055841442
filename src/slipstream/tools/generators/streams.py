"""The engine the record generators share (`generate sensors`, `iot`, `temperature_load`):
event time, transit delay, dirt, files and pacing. A workload module says only what its records
look like (`Workload`); this module decides when each one arrives and what goes wrong with it.

Arrival model. Records are made in event-time order. Each is given a transit delay and lands in
the file whose arrival span holds `event time + delay`; file `k` holds arrivals in
`[start + k*file_every, start + (k+1)*file_every)`, one file per stream and span
(`PREFIX-00000000.jsonl`, lexical order is arrival order). Lines inside a file are in arrival
order. Each record becomes exactly one of:

* **valid, on time**: delay 0.
* **out of order**: delay uniform in (0, watermark/2] (or up to the stream's own `max_delay`,
  as the seed's ad impressions, up to 2 hours in transit); it lands after newer records, and a
  query with that watermark still keeps it (Spark drops a row only when its event time is at or
  below the watermark of the previous micro-batch, which is at most `arrival - watermark`).
* **late**: delay `watermark + window + 3*file_every` plus up to one more watermark. With each
  file its own micro-batch (`maxFilesPerTrigger=1`) and on-time records in every file, the
  watermark two batches back has already passed its window's end, so Spark drops it, always.
  A record is only made late if it would still land before the run's last file (after that the
  watermark stops moving and nothing would be late for certain).
* **duplicate**: an extra exact copy of an earlier valid, not late, line, landing up to one
  file later (so within the watermark of its original).
* **malformed**: one of `not_json` (a cut line), `missing_FIELD` (a required field left out),
  `bad_ts` (an event time no parser reads), `wrong_type` (a number sent as a string).

The same spec, knobs and seed give byte-identical files; nothing depends on the wall clock.
Counts are exact: `lines = valid_unique + duplicates + malformed`, and `late` and
`out_of_order` are subsets of `valid_unique`.

The records and the report are `stream_model.py`; the generators' command line (the flags every
one has, a workload's own `Own` flags, `run`) is `stream_command.py`."""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

from slipstream.core.files import write_atomically
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.monitor.progressbar import ProgressBar
from slipstream.tools.generators.stream_model import (
    DEFAULT_START,
    DIRT,
    REPORT_NAME,
    Record,
    Report,
    Shape,
    StreamCounts,
    StreamSpec,
    Workload,
    bad,
    iso_ms,
    to_ms,
)
from slipstream.tools.generators.trending import Clock, stop_on_sigint

# what the workload modules and tests take from here (defined in stream_model)
__all__ = [
    "DEFAULT_START", "DIRT", "REPORT_NAME", "Record", "Report", "Shape", "StreamCounts",
    "StreamSpec", "Workload", "bad", "folder", "generate", "iso_ms", "to_ms",
]  # fmt: skip


class _Engine:
    def __init__(self, spec: StreamSpec, workload: Workload) -> None:
        self.spec = spec
        self.workload = workload
        self.shapes = {s.name: s for s in workload.shapes}
        self.rng = random.Random(f"slipstream.{workload.name}:{spec.seed}")
        self.dirt = random.Random(f"slipstream.{workload.name}.dirt:{spec.seed}")
        self.start = to_ms(spec.start)
        self.end = self.start + spec.duration // timedelta(milliseconds=1)
        self.every = spec.file_every // timedelta(milliseconds=1)
        self.watermark = spec.watermark // timedelta(milliseconds=1)
        self.late_base = self.watermark + spec.window // timedelta(milliseconds=1) + 3 * self.every
        self.pending: list[tuple[int, int, str, str]] = []  # (arrival, seq, stream, line)
        self.seq = 0
        self.counts = {s.name: StreamCounts() for s in workload.shapes}

    def _max_delay(self, stream: str) -> int:
        delay = self.shapes[stream].max_delay
        return self.watermark // 2 if delay is None else delay // timedelta(milliseconds=1)

    def _push(self, arrival: int, stream: str, line: str) -> None:
        heapq.heappush(self.pending, (arrival, self.seq, stream, line))
        self.seq += 1
        self.counts[stream].lines += 1

    def _line(self, record: Record) -> str:
        shape = self.shapes[record.stream]
        fields = dict(record.fields)
        fields[shape.time_field] = shape.time_text(record.event_ms)
        return json.dumps(fields, separators=(",", ":"))

    def _malformed(self, record: Record) -> tuple[str, str]:
        shape = self.shapes[record.stream]
        kinds = ["not_json", "bad_ts", *(f"missing_{f}" for f in shape.required)]
        if shape.numeric:
            kinds.append("wrong_type")
        kind = kinds[self.dirt.randrange(len(kinds))]
        fields = dict(record.fields)
        fields[shape.time_field] = shape.time_text(record.event_ms)
        if kind == "not_json":
            text = json.dumps(fields, separators=(",", ":"))
            return kind, text[: max(1, len(text) // 2)]
        if kind == "bad_ts":
            fields[shape.time_field] = "soon"
        elif kind == "wrong_type":
            name = shape.numeric[self.dirt.randrange(len(shape.numeric))]
            fields[name] = str(fields.get(name))
        else:
            fields.pop(kind.removeprefix("missing_"), None)
        return kind, json.dumps(fields, separators=(",", ":"))

    def _place(self, record: Record) -> None:
        counts = self.counts[record.stream]
        spec, u = self.spec, self.dirt.random()
        if u < spec.malformed:
            kind, line = self._malformed(record)
            counts.malformed += 1
            counts.malformed_kinds[kind] = counts.malformed_kinds.get(kind, 0) + 1
            self._push(record.event_ms, record.stream, line)
            return
        u -= spec.malformed
        arrival = record.event_ms
        if u < spec.late:
            delay = self.late_base + self.dirt.randrange(self.watermark + 1)
            if record.event_ms + delay < self.end - self.every:
                arrival += delay
                counts.late += 1
        elif u - spec.late < spec.out_of_order:
            arrival += 1 + self.dirt.randrange(max(1, self._max_delay(record.stream)))
            counts.out_of_order += 1
        line = self._line(record)
        counts.valid_unique += 1
        if counts.first_event_ms is None or record.event_ms < counts.first_event_ms:
            counts.first_event_ms = record.event_ms
        if counts.last_event_ms is None or record.event_ms > counts.last_event_ms:
            counts.last_event_ms = record.event_ms
        self._push(arrival, record.stream, line)
        not_late = arrival - record.event_ms <= self._max_delay(record.stream)
        if not_late and self.dirt.random() < spec.duplicates:
            counts.duplicates += 1
            self._push(arrival + self.dirt.randrange(self.every), record.stream, line)

    def files(self) -> Iterator[tuple[int, dict[str, list[str]]]]:
        """(file index, lines by stream) for each arrival span, until nothing is pending."""
        index, lo = 0, self.start
        while lo < self.end or self.pending:
            hi = lo + self.every
            if lo < self.end:
                for record in self.workload.records(self.rng, lo, min(hi, self.end)):
                    self._place(record)
            out: dict[str, list[str]] = {name: [] for name in self.shapes}
            while self.pending and self.pending[0][0] < hi:
                _, _, stream, line = heapq.heappop(self.pending)
                out[stream].append(line)
            yield index, out
            index, lo = index + 1, hi


def folder(out_dir: Path, workload: Workload, stream: str) -> Path:
    """Where a stream's files go: OUT itself for a one-stream workload, else OUT/STREAM."""
    return out_dir if len(workload.shapes) == 1 else out_dir / stream


def generate(
    spec: StreamSpec,
    workload: Workload,
    out_dir: Path,
    *,
    clock: Clock | None = None,
    progress: bool = False,
    write: Callable[[str, list[str]], None] | None = None,
) -> Report:
    """Write the workload's files into `out_dir` (as fast as possible, or with a clock at the
    live rate: file `k` once `clock` reaches its span's end). Ctrl-C stops after the current
    file. Refuses a folder that already holds this workload's files. With `write` (a Kafka
    topic's writer), each file's lines go to `write(name, lines)` instead, and `out_dir` is
    not touched."""
    out_dir = Path(out_dir)
    for shape in workload.shapes if write is None else ():
        target = folder(out_dir, workload, shape.name)
        target.mkdir(parents=True, exist_ok=True)
        existing = sorted(target.glob(f"{shape.name}-*.jsonl"))
        if existing:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"{target} already holds {count(len(existing), shape.name + ' file')} "
                f"(e.g. {existing[0].name})",
                "generate into a new --out directory (Spark never re-reads a file name it has "
                "seen)",
            )
    engine = _Engine(spec, workload)
    started = clock.now() if clock is not None else 0.0
    every_s = spec.file_every.total_seconds()
    with (
        stop_on_sigint() as stop,
        ProgressBar(None, workload.name, enabled=None if progress else False) as bar,
    ):
        for index, lines in engine.files():
            if stop.is_set():
                break
            if clock is not None:
                try:
                    clock.sleep_until(started + (index + 1) * every_s)
                except KeyboardInterrupt:
                    stop.set()
            for stream, stream_lines in lines.items():
                if stream_lines:
                    name = f"{stream}-{index:08d}.jsonl"
                    if write is not None:
                        write(name, stream_lines)
                    else:
                        write_atomically(folder(out_dir, workload, stream), name, stream_lines)
                    engine.counts[stream].files += 1
                    bar.update(len(stream_lines))
    return Report(workload.name, spec, engine.counts, workload.info(), stop.is_set())
