"""The input of a scenario and its independent model: the generators' files (with their dirt)
and what each sink must hold over everything landed, computed with plain Python and pandas
(tests/stream_reference.py's lateness rules), sharing no code with the pipelines.

mobile: `generate mobile`'s actions, malformed, late, out-of-order and duplicated records, one
file per micro-batch (`--max-files-per-trigger 1`). Its late records are in transit at least
watermark + window + 3 files (here 20s + 20s + 3 x 20s), so they are late however kills and
restarts cut the batches, and its out-of-order ones at most half a watermark, so never late:
the model does not depend on where a fault lands. wordcount: `generate wordcount`'s lines (blank
ones included)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from slipstream.tools.generators import mobile as mobile_generator
from slipstream.tools.generators.streams import StreamSpec, generate
from tests import stream_reference as ref

#: short, so that a scenario of 8-11 files of 20 seconds closes windows and has late records
WINDOW = WATERMARK = timedelta(seconds=20)
FILE_EVERY = timedelta(seconds=20)
#: the changed parameter of the `window` fault
OTHER_WINDOW = "40s"


@dataclass
class Model:
    """What the sink must hold: `table` (update mode: every key's value), `final` (append mode:
    the windows the final watermark closed), and how many lines the quarantine must hold."""

    table: dict[tuple[Any, ...], int]
    final: dict[tuple[Any, ...], int]
    quarantined: int
    lines: int
    late: int


class Workload:
    pipeline: str
    pattern: str  # the generated files' glob
    key: tuple[str, ...]
    quarantine: str | None = None  # the stream input whose quarantine folder is checked
    dead_letter = False  # its output keeps late rows in a dead-letter (runtime/deadletter.py)
    args: tuple[str, ...] = ()  # flags of every run

    def generate(self, out: Path, files: int, seed: int) -> list[Path]:
        raise NotImplementedError

    def model(self, batches: list[list[str]]) -> Model:
        """Over every landed file's lines as its batch read them, in the order read."""
        raise NotImplementedError

    def rows(self, frame: Any) -> dict[tuple[Any, ...], int]:
        """A sink's rows as key -> count (keys as the model writes them)."""
        raise NotImplementedError


class Mobile(Workload):
    pipeline = "mobile"
    pattern = "actions-*.jsonl"
    key = ("window_start", "action")
    quarantine = "actions"
    dead_letter = True
    args = ("--window", "20s", "--watermark", "20s")

    def generate(self, out: Path, files: int, seed: int) -> list[Path]:
        spec = StreamSpec(
            duration=FILE_EVERY * files, seed=seed, file_every=FILE_EVERY,
            watermark=WATERMARK, window=WINDOW,
            out_of_order=0.1, late=0.04, duplicates=0.03, malformed=0.04,
        )  # fmt: skip
        generate(spec, mobile_generator.Phones(devices=20, rate=2.0), out)
        return sorted(out.glob(self.pattern))

    def model(self, batches: list[list[str]]) -> Model:
        kept, stats = ref.counted(batches, ref.mobile_action, "ts", None, WATERMARK, WINDOW)
        table = Counter((ref.iso(ref.window_start(r["ts"], WINDOW)), r["action"]) for r in kept)
        watermark = stats["watermark"]
        final = {
            key: n
            for key, n in table.items()
            if watermark is not None and ref.parse_time(key[0]) + WINDOW <= watermark  # type: ignore[operator]
        }
        lines = sum(len(b) for b in batches)
        return Model(dict(table), final, stats["invalid"], lines, stats["late"])

    def rows(self, frame: Any) -> dict[tuple[Any, ...], int]:
        import pandas as pd

        starts = pd.to_datetime(frame["window_start"], utc=True)
        return {
            (ref.iso(start.to_pydatetime()), str(action)): int(n)
            for start, action, n in zip(starts, frame["action"], frame["count"], strict=True)
        }


class WordCount(Workload):
    pipeline = "wordcount"
    pattern = "lines-*.txt"
    key = ("word",)

    def generate(self, out: Path, files: int, seed: int) -> list[Path]:
        import contextlib
        import io

        from slipstream.app.cli import main

        argv = ["generate", "wordcount", "--out", str(out), "--lines", str(40 * files),
                "--lines-per-file", "40", "--seed", str(seed)]  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0
        return sorted(out.glob(self.pattern))

    def model(self, batches: list[list[str]]) -> Model:
        lines = [line for batch in batches for line in batch]
        table = Counter((word,) for line in lines for word in line.split())
        return Model(dict(table), dict(table), 0, len(lines), 0)

    def rows(self, frame: Any) -> dict[tuple[Any, ...], int]:
        return {(str(w),): int(n) for w, n in zip(frame["word"], frame["count"], strict=True)}


WORKLOADS: dict[str, Workload] = {w.pipeline: w for w in (Mobile(), WordCount())}
