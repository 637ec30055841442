"""`--sink batch:module:attr` without Spark: its spec, loading the user's function, the ledger's
skip of a recorded batch and the failure code (the run: tests/spark/sinks/test_batch_writer.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError, SlipstreamError
from slipstream.sinks.base import BatchInfo, SinkContext
from slipstream.sinks.batch import LEDGER, BatchFunctionSink, load_batch_writer
from slipstream.sinks.registry import make_sink


def _ctx(tmp_path: Path) -> SinkContext:
    return SinkContext("mobile", "mobile.counts", "counts", ("k",), "update", tmp_path / "cp")


def test_the_spec_names_a_function_and_the_sink_loads_it(tmp_path: Path) -> None:
    spec = SinkSpec.parse("batch:examples.batch_writer:to_sqlite")
    assert spec == SinkSpec("batch", "examples.batch_writer:to_sqlite")
    sink = make_sink(spec, tmp_path / "db")
    assert isinstance(sink, BatchFunctionSink)
    assert sink.writer.__name__ == "to_sqlite"  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        SinkSpec.parse("batch:nomodule")


@pytest.mark.parametrize(
    "target", ["nomodule", "no_such_module_x:f", "examples.batch_writer:missing", "os:sep"]
)
def test_a_target_that_is_not_a_callable_is_refused(target: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_batch_writer(target)
    assert err.value.code == "SINK_BAD_TARGET"


def test_a_recorded_batch_is_skipped_and_a_new_one_written_then_recorded(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []

    def write(frame: Any, info: BatchInfo) -> None:
        calls.append((info.query_id, info.batch_id))

    sink = BatchFunctionSink(SinkSpec("batch", "m:f"), writer=write)
    info = BatchInfo("q-1", 3, _ctx(tmp_path))
    frame = MagicMock()
    sink.write_batch(frame, info)
    assert calls == [("q-1", 3)]
    assert (tmp_path / "cp" / LEDGER / "q-1-0000000003").exists()
    sink.write_batch(frame, info)  # a replay
    assert calls == [("q-1", 3)] and sink.skipped_batches == 1
    frame.write.format.assert_called_with("noop")  # the skipped batch still ran its plan
    sink.write_batch(frame, BatchInfo("q-1", 4, info.ctx))
    sink.write_batch(frame, BatchInfo("q-2", 3, info.ctx))  # another query's batch 3
    assert calls == [("q-1", 3), ("q-1", 4), ("q-2", 3)]


def test_a_failing_writer_is_sink_write_failed_and_its_batch_is_not_recorded(
    tmp_path: Path,
) -> None:
    def write(frame: Any, info: BatchInfo) -> None:
        raise RuntimeError("table locked\nmore detail")

    sink = BatchFunctionSink(SinkSpec("batch", "m:f"), writer=write)
    with pytest.raises(SlipstreamError) as err:
        sink.write_batch(MagicMock(), BatchInfo("q-1", 0, _ctx(tmp_path)))
    assert err.value.code == "SINK_WRITE_FAILED"
    assert "RuntimeError: table locked" in str(err.value) and "more detail" not in str(err.value)
    assert not (tmp_path / "cp" / LEDGER).exists()
