"""Issue 13's hostile input for the fourth format: Parquet files through a parquet stream input.

The files are made here with pyarrow (binary fixtures, each a few lines to build) and `FILES`
says each one's fate, in the style of tests/fixtures/hostile/expected.json: a file is read
(its rows accepted, or quarantined one by one by the required-field rule) or rejected whole
(one quarantine record: the file's path, size, first bytes and a reason). A rejected file
counts as one record sent; a read file, its rows. The expected rows come from pyarrow reading
the same files, not from slipstream's code, and `valid + quarantined + late + duplicates = sent`
must hold with late = duplicates = 0 (the pipeline has no watermark and keeps duplicates).

All files land before the run starts, so its first batch reads them all; `deleted.parquet` is
deleted by the sink once the batch's plan has listed it (tests/spark/ingest/test_hostile.py explains
how)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.ingest.parse import REASON, SOURCE
from slipstream.sinks.quarantine import read_quarantine
from slipstream.sources.parquet_files import parquet_rows
from slipstream.testing import PipelineHarness
from tests.spark.ingest.test_hostile import NUMBERS, DeletingCollectSink, delete_in_the_ingest_stage

pytestmark = pytest.mark.spark

T0 = datetime(2018, 3, 2, 10, 2, 33, tzinfo=UTC)
MISMATCH = "parquet_schema_mismatch: "
CORRUPT = "parquet_corrupt: "

# file -> its fate: "read" (rows judged one by one), "rejected" (with the reason or its start),
# "withdrawn" (deleted after Spark listed it: not sent), "skipped" (no records: not sent)
FILES: dict[str, dict[str, str]] = {
    "valid.parquet": {"fate": "read", "kind": "the declared types exactly (control)"},
    "widened.parquet": {"fate": "read", "kind": "int16, float32, naive ms timestamps: widened"},
    "nanos.parquet": {"fate": "read", "kind": "int8, int32 as double, ns timestamps with a tz"},
    "extra_column.parquet": {"fate": "read", "kind": "a column not declared: ignored"},
    "optional_missing.parquet": {"fate": "read", "kind": "no column x (optional): NULLs"},
    "nulls_required.parquet": {"fate": "read", "kind": "NULL in required id and ts"},
    "no_rows.parquet": {"fate": "read", "kind": "a valid file of no rows"},
    "type_mismatch.parquet": {
        "fate": "rejected",
        "reason": MISMATCH + "column 'n' is string, declared int",
    },
    "narrower.parquet": {
        "fate": "rejected",
        "reason": MISMATCH + "column 'n' is int64, declared int",
    },
    "ts_string.parquet": {
        "fate": "rejected",
        "reason": MISMATCH + "column 'ts' is string, declared timestamp",
    },
    "missing_required.parquet": {
        "fate": "rejected",
        "reason": MISMATCH + "required column 'ts' is missing",
    },
    # Spark's file scan leaves out a file of 0 bytes before any reader sees it (an empty JSON,
    # CSV or text file too): no records, none sent
    "empty.parquet": {"fate": "skipped", "kind": "0 bytes"},
    "tiny.parquet": {"fate": "rejected", "reason": CORRUPT + "5 bytes, too short for Parquet"},
    "truncated.parquet": {
        "fate": "rejected",
        "reason": CORRUPT + "no PAR1 magic at the end (truncated, or not Parquet)",
    },
    "not_parquet.parquet": {
        "fate": "rejected",
        "reason": CORRUPT + "no PAR1 magic at the start (not Parquet)",
    },
    "corrupt_footer.parquet": {
        "fate": "rejected",
        "reason_starts": CORRUPT + "unreadable footer: ",
    },
    "corrupt_page.parquet": {"fate": "rejected", "reason_starts": CORRUPT + "unreadable data: "},
    "deleted.parquet": {"fate": "withdrawn", "kind": "deleted after listing, before reading"},
}


def _table(rows: int, /, **override: pa.Array) -> pa.Table:
    """`rows` rows of the declared columns in their declared types, some replaced or removed
    (`name=None`), or extra ones added."""
    cols: dict[str, Any] = {
        "id": pa.array([f"id-{i}" for i in range(rows)]),
        "n": pa.array(range(rows), pa.int32()),
        "x": pa.array([i + 0.5 for i in range(rows)], pa.float64()),
        "ts": pa.array([T0.replace(second=i) for i in range(rows)], pa.timestamp("us", "UTC")),
    }
    cols.update(override)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def _bytes(table: pa.Table, **options: Any) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    return sink.getvalue().to_pybytes()


def make_files() -> dict[str, bytes]:
    valid = _bytes(_table(3))
    plain = _bytes(
        _table(2, id=pa.array(["corrupt-me-0000", "corrupt-me-1111"])),
        compression="none",
        use_dictionary=False,
        write_page_checksum=True,
        write_statistics=False,
    )
    at = plain.index(b"corrupt-me-1111")
    footer_len = int.from_bytes(valid[-8:-4], "little")
    start = len(valid) - 8 - footer_len
    return {
        "valid.parquet": valid,
        "widened.parquet": _bytes(
            _table(
                2,
                n=pa.array([-7, 300], pa.int16()),
                x=pa.array([1.5, -2.25], pa.float32()),
                ts=pa.array([T0.replace(tzinfo=None)] * 2, pa.timestamp("ms")),
            )
        ),
        "nanos.parquet": _bytes(
            _table(
                2,
                n=pa.array([1, 2], pa.int8()),
                x=pa.array([2**31 - 1, -5], pa.int32()),
                ts=pa.array([1_520_000_000_123_456_789] * 2, pa.timestamp("ns", "Europe/Paris")),
            )
        ),
        "extra_column.parquet": _bytes(_table(2, comment=pa.array(["a", "b"]))),
        "optional_missing.parquet": _bytes(_table(2, x=None)),
        "nulls_required.parquet": _bytes(
            _table(
                3,
                id=pa.array(["a", None, "c"]),
                ts=pa.array([T0, T0, None], pa.timestamp("us", "UTC")),
            )
        ),
        "no_rows.parquet": _bytes(_table(0)),
        "type_mismatch.parquet": _bytes(_table(2, n=pa.array(["1", "2"]))),
        "narrower.parquet": _bytes(_table(2, n=pa.array([1, 2**40], pa.int64()))),
        "ts_string.parquet": _bytes(_table(1, ts=pa.array(["2018-03-02T10:02:33Z"]))),
        "missing_required.parquet": _bytes(_table(2, ts=None)),
        "empty.parquet": b"",
        "tiny.parquet": b"PAR1P",
        "truncated.parquet": valid[: len(valid) // 2],
        "not_parquet.parquet": b'{"id": "p1", "n": 1, "ts": "2018-03-02T10:02:33Z"}\n',
        "corrupt_footer.parquet": valid[:start] + b"\xff" * footer_len + valid[-8:],
        "corrupt_page.parquet": plain[:at] + b"CORRUPT" + plain[at + 7 :],
        "deleted.parquet": valid,
    }


class ParquetNumbers(Pipeline):
    """Every valid record of a parquet input, passed through."""

    name = "hostile_parquet"
    description = "parquet records with an int and a double, passed through"
    inputs = (Input("rows", NUMBERS, format="parquet", required=("id", "ts")),)
    outputs = (Output("rows"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"rows": inputs["rows"]}


def _row(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """(id, n, x, ts) of a row: the sink's (ts as ISO text) or pyarrow's (an aware datetime)."""
    ts = record["ts"]
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return (record["id"], record["n"], record["x"], ts.astimezone(UTC))


def expected_rows(data: bytes) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """pyarrow's reading of a file the run reads: the valid rows (as the declared types hold
    them: timestamps to the microsecond) and the quarantined ones (raw JSON -> reason)."""
    table = pq.read_table(pa.BufferReader(data))
    index = table.schema.get_field_index("ts")
    us = table.column(index).cast(pa.timestamp("us", "UTC"), safe=False)  # naive: UTC
    valid, bad = [], {}
    for rec in table.set_column(index, "ts", us).to_pylist():
        rec = {k: rec.get(k) for k in ("id", "n", "x", "ts")}
        if rec["n"] is not None:
            rec["n"] = int(rec["n"])
        if rec["x"] is not None:
            rec["x"] = float(rec["x"])
        missing = [c for c in ("id", "ts") if rec[c] is None]
        if missing:
            bad[rec["id"] or ""] = f"missing required field '{missing[0]}'"
        else:
            valid.append(_row(rec))
    return valid, bad


def test_hostile_parquet_files(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = make_files()
    assert set(files) == set(FILES)
    sink = DeletingCollectSink(tmp_path / "input" / "deleted.parquet")
    delete_in_the_ingest_stage(monkeypatch, sink)
    run = PipelineHarness(spark, ParquetNumbers(), tmp_path, sink=sink)
    for name, data in files.items():
        (run.input / name).write_bytes(data)
    try:
        run.start()
        run.process()
        assert run.run is not None
        failed = {q.name: q.exception() for q in run.run.queries.values()}
        out = [r for batch in sorted(sink.batches) for r in sink.batches[batch]]
        folder = run.prepared.inputs["rows"].quarantine
        assert folder is not None
        quarantine = [r.asDict() for r in read_quarantine(spark, folder).collect()]
        totals = run.totals["hostile_parquet.rows"]
    finally:
        run.stop()
    assert not any(failed.values()), failed
    assert sink.deleted_in == 0

    by_file: dict[str, list[dict[str, Any]]] = {}
    for q in quarantine:
        by_file.setdefault(Path(q["source"]).name, []).append(q)
    want_valid: list[tuple[Any, ...]] = []
    sent = quarantined = 0
    for name, fate in FILES.items():
        rows = by_file.pop(name, [])
        data = files[name]
        if fate["fate"] in ("withdrawn", "skipped"):
            assert rows == [], name
        elif fate["fate"] == "rejected":
            sent += 1
            assert len(rows) == 1, (name, rows)
            reason = rows[0]["reason"]
            if "reason" in fate:
                assert reason == fate["reason"], name
            else:
                assert reason.startswith(fate["reason_starts"]), (name, reason)
            raw = json.loads(rows[0]["raw"])
            assert Path(raw["file"]).name == name and raw["bytes"] == len(data), raw
            assert base64.b64decode(raw["head"]) == data[:64], name
            quarantined += 1
        else:
            valid, bad = expected_rows(data)
            sent += len(valid) + len(bad)
            want_valid += valid
            got_bad = {json.loads(r["raw"]).get("id") or "": r["reason"] for r in rows}
            assert got_bad == bad, name
            quarantined += len(rows)
    assert by_file == {}, "quarantined from no file of the corpus"
    got_valid = [_row(r) for r in out]
    assert Counter(got_valid) == Counter(want_valid)
    assert len(got_valid) + quarantined + 0 + 0 == sent
    assert totals["quarantined"] == quarantined

    # a batch read of the same files (the late-row dead-letter's re-read) judges them alike
    landed = [str(p) for p in run.input.iterdir()]
    again = parquet_rows(spark.read.format("binaryFile").load(landed), NUMBERS, ("id", "ts"))
    verdicts = again.filter(F.col(REASON).isNotNull()).select(SOURCE, REASON).collect()
    files_rejected = {
        (q["source"], q["reason"]) for q in quarantine if q["reason"].startswith("parquet_")
    }
    assert {(r[SOURCE], r[REASON]) for r in verdicts} == files_rejected
