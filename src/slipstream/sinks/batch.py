"""Your own batch writer: `--sink batch:module:attr`, Spark's `foreachBatch` with a ledger.

`attr` names a function, a callable instance, or a class (instantiated once, with no arguments,
on the driver) whose instances are callable. It is called on the driver once per micro-batch:

    write(frame, info) -> None    frame: the batch's rows, a DataFrame (timestamps as Spark has
                                  them); info: `BatchInfo` with `.query_id` (Spark's query id,
                                  stable across restarts of one checkpoint), `.batch_id` and
                                  `.ctx` (the pipeline, the output's table, key and mode)

What it guarantees. After the function returns, slipstream records the batch in a small ledger
(one file per batch, written atomically, in `batch-ledger/` under the output's checkpoint
folder). A batch Spark replays after a crash is looked up there first: found, the function is
not called again (a log line says so). That leaves one window: a crash after the function's
write and before the ledger's record replays that batch once. So the function's write should be
idempotent by `(info.query_id, info.batch_id)`: delete the rows of that batch id and insert the
batch in one transaction, or MERGE on the output's key. Together: exactly-once.

A failure keeps slipstream's codes: the function's exception becomes SINK_WRITE_FAILED naming
the batch and the exception's first line; the batch is not recorded, so Spark retries it (the
query stops; a restart from the checkpoint runs it again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame

from slipstream.core.files import write_atomically
from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError, SlipstreamError
from slipstream.sinks.base import BatchInfo, BatchSink, SinkContext, drain, fault_point
from slipstream.sinks.foreach import import_attr

log = logging.getLogger("slipstream.sinks")

BatchWriter = Callable[[DataFrame, BatchInfo], None]

#: the ledger's folder under an output's checkpoint
LEDGER = "batch-ledger"


def load_batch_writer(target: str) -> BatchWriter:
    """`module:attr` -> the function (or callable object) to call once per batch."""
    obj = import_attr(
        target,
        "batch",
        "give --sink batch:package.module:function",
        "of the driver",
        "name a function write(frame, info), or a class whose instances are callable",
    )
    if not callable(obj):
        raise ConfigError(
            "SINK_BAD_TARGET",
            f"{target} is not callable",
            "define a function write(frame, info), or a class with __call__(self, frame, info)",
        )
    return obj  # type: ignore[no-any-return]


class BatchLedger:
    """The batches a writer completed, one empty file each: `DIR/<query id>-<batch id>`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _name(self, info: BatchInfo) -> str:
        return f"{info.query_id}-{info.batch_id:010d}"

    def done(self, info: BatchInfo) -> bool:
        return (self.directory / self._name(info)).exists()

    def record(self, info: BatchInfo) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(self.directory, self._name(info), [])


class BatchFunctionSink(BatchSink):
    """A user's function per committed micro-batch (see the module doc for the guarantees)."""

    kind = "batch"
    target_grammar = "module"
    usage = "batch:module:attr"

    def __init__(self, spec: SinkSpec, writer: BatchWriter | None = None) -> None:
        super().__init__(spec)
        assert spec.target is not None
        self.writer = writer if writer is not None else load_batch_writer(spec.target)

    @staticmethod
    def ledger(ctx: SinkContext) -> BatchLedger:
        return BatchLedger(Path(ctx.checkpoint) / LEDGER)

    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        ledger = self.ledger(info.ctx)
        if ledger.done(info):
            log.info(
                "batch %d of %s is in the batch ledger: a replay, not written again",
                info.batch_id,
                info.ctx.query_name,
            )
            self.skipped_batches += 1
            drain(batch)  # a stateful batch commits its state only when every partition ran
            return
        try:
            self.writer(batch, info)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise SlipstreamError(
                "SINK_WRITE_FAILED",
                f"the batch writer {self.spec.target} failed on batch {info.batch_id} of "
                f"{info.ctx.query_name}: {type(exc).__name__}: {first}",
                "fix the writer (its traceback is in the log); the batch is not in the ledger, "
                "so a restart from the checkpoint writes it again",
            ) from exc
        fault_point("before-commit", info.batch_id)  # written, not yet in the ledger
        ledger.record(info)

    def describe(self, ctx: SinkContext | None = None) -> str:
        return f"batch {self.spec.target} (exactly-once with a writer idempotent by batch id)"
