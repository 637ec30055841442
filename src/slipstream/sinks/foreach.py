"""Row-at-a-time sinks: `--sink foreach:module:attr`, Spark's ForeachWriter contract.

`attr` names a class (instantiated once, with no arguments, on the driver), an instance, or a
plain function. A writer object has three methods, called on the executors:

    open(partition_id, epoch_id) -> bool   once per partition per micro-batch (epoch = batch id);
                                           return False to skip this partition's rows
    process(row)                           once per row (a pyspark Row), only if open said True
    close(error)                           always, with the exception or None

Spark pickles the object and sends a copy to every task, so state set in `__init__` travels with
it, and `open` is where connections are made (not `__init__`, which runs on the driver).

What it guarantees: at-least-once. After a crash, Spark replays the last micro-batch with the same
epoch id and the same rows in the same partitions, so a partition's rows can reach `process` twice.
A writer turns that into exactly-once by remembering which (partition_id, epoch_id) it has
committed, in the same transaction or atomic step as the rows, and returning False from `open` for
those. A plain function (`process(row)` alone, the seed's `foreach(f)`) is never told the epoch or
the partition, so it cannot tell a replay from new data: it is at-least-once, full stop.

What it does not: no batching across rows (each row is a call; prefer a `BatchSink`, e.g. the
PostgreSQL or SQLite sink, for databases), no ordering across partitions, and no retries beyond
Spark's task retries (which also re-run `open`/`process`/`close` for that partition).

`JsonLinesWriter` below is a complete example: it writes each (epoch, partition) to its own file,
atomically in `close`, and `open` skips a pair whose file exists, so replays are not doubled.

    SLIPSTREAM_FOREACH_DIR=out slipstream run mobile \
        --sink foreach:slipstream.sinks.foreach:JsonLinesWriter
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import DataStreamWriter

from slipstream.core.files import write_atomically
from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.sinks.base import Sink, SinkContext


def import_attr(target: str, sink: str, give: str, where: str, name_fix: str) -> Any:
    """`module:attr` -> the object it names, for a sink of user code (foreach, batch); a class
    is made once with no arguments. Refusals name the sink, the target and the fix."""
    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise ConfigError(
            "SINK_BAD_TARGET", f"{sink} sink target {target!r} is not module:attr", give
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            "SINK_BAD_TARGET",
            f"cannot import {module_name!r} for the {sink} sink: {exc}",
            f"make the module importable (installed, or on PYTHONPATH {where})",
        ) from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ConfigError(
            "SINK_BAD_TARGET", f"module {module_name!r} has no attribute {attr!r}", name_fix
        )
    return obj() if inspect.isclass(obj) else obj


def load_writer(target: str) -> Any:
    """`module:attr` -> a writer object or function; refuses what Spark could not call."""
    obj = import_attr(
        target,
        "foreach",
        "give --sink foreach:package.module:WriterClass",
        "on the driver and executors",
        "name a ForeachWriter-style class, an instance, or a function",
    )
    if hasattr(obj, "process"):
        if not callable(obj.process):
            raise ConfigError(
                "SINK_BAD_TARGET", f"{target}: process is not a method", "define process(self, row)"
            )
        return obj
    if callable(obj):
        return obj
    raise ConfigError(
        "SINK_BAD_TARGET",
        f"{target} is neither a writer (with process(row)) nor a function",
        "define a class with open(partition_id, epoch_id), process(row) and close(error)",
    )


class ForeachSink(Sink):
    """Spark's `foreach` sink around a user's writer (see the module doc for the guarantees)."""

    kind = "foreach"
    target_grammar = "module"
    usage = "foreach:module:attr"
    continuous = True
    real_time = True

    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        assert spec.target is not None
        self.writer = load_writer(spec.target)

    @property
    def deduplicates(self) -> bool:
        """Only a writer with open(partition_id, epoch_id) can recognise a replayed batch."""
        return callable(getattr(self.writer, "open", None))

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        return writer.foreach(self.writer)

    def describe(self, ctx: SinkContext | None = None) -> str:
        if self.deduplicates:
            promise = "at-least-once; the writer's open(partition, epoch) can skip replays"
        else:
            promise = "at-least-once; a plain function cannot recognise replayed batches"
        return f"foreach {self.spec.target} ({promise})"


class JsonLinesWriter:
    """Example writer: DIR/epoch=E/part-P.jsonl per (epoch, partition), exactly once.

    The file of a pair is published atomically in `close` (temporary name, then rename), so it
    exists completely or not at all; `open` returns False for a pair whose file exists, so a
    batch replayed after a crash is not written twice. Timestamps are ISO-8601 UTC text.
    DIR is the constructor's argument or the SLIPSTREAM_FOREACH_DIR environment variable, read
    on the driver (the object is pickled with it)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        directory = directory or os.environ.get("SLIPSTREAM_FOREACH_DIR")
        if not directory:
            raise ConfigError(
                "CONFIG_MISSING",
                "JsonLinesWriter needs a directory",
                "set SLIPSTREAM_FOREACH_DIR=DIR",
            )
        self.directory = str(directory)

    def path(self, partition_id: int, epoch_id: int) -> Path:
        return Path(self.directory) / f"epoch={epoch_id:08d}" / f"part-{partition_id:05d}.jsonl"

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._path = self.path(partition_id, epoch_id)
        self._lines: list[str] = []
        return not self._path.exists()  # written before this replay: skip it

    def process(self, row: Any) -> None:
        self._lines.append(json.dumps({k: _plain(v) for k, v in row.asDict().items()}))

    def close(self, error: BaseException | None) -> None:
        if error is not None or not self._lines:
            return

        self._path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self._path.parent, self._path.name, self._lines)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def read_jsonl(directory: Path) -> list[dict[str, Any]]:
    """Every row a JsonLinesWriter wrote, in epoch order (tests, the docs' example)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob("epoch=*/part-*.jsonl")):
        epoch = int(path.parent.name.split("=")[1])
        rows += [{"_epoch": epoch, **json.loads(line)} for line in path.read_text().splitlines()]
    return rows
