"""Sinks show an output's latest rows without Spark: what the dashboard and `status` display.
File sinks read only what Spark's `_spark_metadata` log says was committed (no Spark here)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from slipstream.core.specs import SinkSpec
from slipstream.sinks import SinkContext, make_sink

CTX = SinkContext("p", "p.out", "out", ("k",), "append", Path("ck"))


def land(directory: Path, name: str, rows: list[dict]) -> Path:
    path = directory / name
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def commit(directory: Path, batch: int, files: list[Path], compact: bool = False) -> None:
    log = directory / "_spark_metadata"
    log.mkdir(exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": f.as_uri(), "size": 1, "action": "add"}) for f in files]
    (log / f"{batch}{'.compact' if compact else ''}").write_text("\n".join(lines))


def test_a_parquet_output_shows_its_committed_rows_newest_first(tmp_path: Path) -> None:
    at = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    first = land(tmp_path, "part-0.parquet", [{"k": "a", "n": 1, "at": at}])
    second = land(
        tmp_path, "part-1.parquet", [{"k": "b", "n": 2, "at": at}, {"k": "c", "n": 3, "at": at}]
    )
    land(tmp_path, "part-2.parquet", [{"k": "half-written", "n": 9, "at": at}])  # no commit
    commit(tmp_path, 0, [first])
    commit(tmp_path, 1, [second])
    sink = make_sink(SinkSpec.parse(f"parquet:{tmp_path}"), tmp_path / "db")
    view = sink.preview(CTX, limit=10)
    assert view is not None and view["columns"] == ["k", "n", "at"]
    expected = pq.read_table(second).to_pylist()[::-1] + pq.read_table(first).to_pylist()
    assert [row[0] for row in view["rows"]] == [r["k"] for r in expected] == ["c", "b", "a"]
    assert view["rows"][0][2] == "2026-01-01T10:00:00Z"
    assert view["updated"] is not None
    assert [r[0] for r in sink.preview(CTX, limit=2)["rows"]] == ["c", "b"]


def test_a_compacted_log_replaces_the_batches_before_it(tmp_path: Path) -> None:
    old = land(tmp_path, "old.parquet", [{"k": "old"}])
    kept = land(tmp_path, "kept.parquet", [{"k": "kept"}])
    commit(tmp_path, 0, [old])
    commit(tmp_path, 9, [kept], compact=True)  # Spark's compaction lists every live file
    view = make_sink(SinkSpec.parse(f"parquet:{tmp_path}"), tmp_path).preview(CTX)
    assert view is not None and view["rows"] == [["kept"]]


def test_outputs_nothing_can_read_back_show_nothing(tmp_path: Path) -> None:
    assert make_sink(SinkSpec.parse("console"), tmp_path).preview(CTX) is None
    empty = make_sink(SinkSpec.parse(f"json:{tmp_path / 'none'}"), tmp_path).preview(CTX)
    assert empty == {"columns": [], "rows": [], "updated": None}
