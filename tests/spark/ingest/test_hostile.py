"""Issue 13's hostile-input corpus (tests/fixtures/hostile/) through real pipelines.

One streaming run per input format, all four running together: `mobile` on JSON and on CSV
(`--format csv`), a small pipeline declared here with an int and a double (JSON and CSV inputs),
and `wordcount` on text. Every file of a run lands before it starts, so each run reads the whole
corpus in its first batch. For every file and in total, the fates are those `expected.json` gives
by hand (accepted with its values, quarantined with its raw line and reason, late, skipped when
it is no record), the counts reconcile (`valid + quarantined + late + duplicates = sent`) and no
query fails.

A file deleted between listing and reading is made deterministic with a sink: the first
batch's plan has listed every file, and Spark reads them only when the sink runs the plan, so a
sink that deletes `deleted.*` before it collects its batch removes a listed file before the read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.pipelines.mobile import MobilePipeline
from slipstream.sinks.base import BatchInfo
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import CollectSink, PipelineHarness

pytestmark = pytest.mark.spark

CORPUS = Path(__file__).parents[2] / "fixtures" / "hostile"
MANIFEST: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text())["files"]
LONG_LINE = "json/long_line.json"
BOM = b"\xef\xbb\xbf"


def long_line() -> bytes:
    """The 20 MB line, made here rather than committed."""
    pad = b"x" * (20 * 1024 * 1024)
    big = b'{"id": "p1", "action": "long-big", "ts": "2018-03-02T10:02:33", "pad": "' + pad + b'"}'
    return big + b'\n{"id": "p1", "action": "long-ok", "ts": "2018-03-02T10:02:33"}\n'


def corpus_bytes(key: str) -> bytes:
    return long_line() if key == LONG_LINE else (CORPUS / key).read_bytes()


def lines_of(data: bytes) -> list[bytes]:
    """A file's lines as Hadoop's line reader splits them (LF, CRLF, CR; a leading BOM
    dropped)."""
    return (data[len(BOM) :] if data.startswith(BOM) else data).splitlines()


NUMBERS = StructType(
    [
        StructField("id", StringType()),
        StructField("n", IntegerType()),
        StructField("x", DoubleType()),
        StructField("ts", TimestampType()),
    ]
)


class NumbersPipeline(Pipeline):
    """Every valid record as it was typed: numbers out of range for the schema, seen exactly."""

    name = "hostile_numbers"
    description = "records with an int and a double, passed through"
    inputs = (
        Input("json", NUMBERS, required=("id", "ts")),
        Input("csv", NUMBERS, format="csv", required=("id", "ts")),
    )
    outputs = (Output("rows"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"rows": inputs["json"].unionByName(inputs["csv"])}


class MobileCsv(MobilePipeline):
    """mobile itself, under another name: its queries run beside the JSON run's."""

    name = "mobile_csv"


class DeletingCollectSink(CollectSink):
    """Deletes the landing folder's `deleted.*` when its first batch is written, before the
    batch's plan (which has listed it) reads the files."""

    def __init__(self, victim: Path) -> None:
        super().__init__()
        self.victim = victim
        self.deleted_in: int | None = None

    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        if self.victim.exists():
            self.victim.unlink()
            self.deleted_in = info.batch_id
        super().write_batch(batch, info)


def delete_in_the_ingest_stage(
    monkeypatch: pytest.MonkeyPatch, *sinks: DeletingCollectSink
) -> None:
    """Under the ingest stage the raw files are read by the ingest query, whose batch runs
    before any output's: each sink's victim is deleted there, in its own run's ingest batch
    (after the listing, before the read), as the sink deletes it without the stage."""
    from slipstream.runtime.ingest_stage import IngestBatch

    original = IngestBatch.__call__

    def call(self: IngestBatch, batch: DataFrame, batch_id: int) -> None:
        for sink in sinks:
            if sink.victim.exists() and sink.victim.parent.parent in self.bronze.parents:
                sink.victim.unlink()
                sink.deleted_in = batch_id
        original(self, batch, batch_id)

    monkeypatch.setattr(IngestBatch, "__call__", call)


def land(folder: Path, keys: list[str]) -> dict[str, str]:
    """Copy corpus files into a landing folder; file name -> manifest key."""
    named = {}
    for key in keys:
        name = Path(key).name
        (folder / name).write_bytes(corpus_bytes(key))
        named[name] = key
    return named


def keys(prefix: str) -> list[str]:
    return sorted(k for k in MANIFEST if k.startswith(prefix))


def quarantined(spark: SparkSession, folder: Path | None) -> list[dict[str, Any]]:
    assert folder is not None
    return [r.asDict() for r in read_quarantine(spark, folder).collect()]


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_quarantine(key: str, rows: list[dict[str, Any]]) -> int:
    """The file's quarantined records: each raw line once, with its reason. Returns how many."""
    data = corpus_bytes(key)
    lines = lines_of(data)
    records = MANIFEST[key]["records"]
    assert len(lines) == len(records), f"{key}: manifest has {len(records)} lines"
    expected = {
        line.decode("utf-8", "replace"): r
        for line, r in zip(lines, records, strict=True)
        if r["fate"] == "quarantined"
    }
    got = {row["raw"]: row["reason"] for row in rows}
    assert len(got) == len(rows), f"{key}: a record quarantined twice"
    assert set(got) == set(expected), key
    for raw, record in expected.items():
        if "reason" in record:
            assert got[raw] == record["reason"], (key, raw[:80])
        else:
            assert got[raw].startswith(record["reason_starts"]), (key, raw[:80], got[raw])
    return len(rows)


def lines_read(keys: Iterable[str]) -> int:
    """The lines Spark reads of these files: blank lines and headers too, a deleted file none."""
    return sum(len(MANIFEST[k]["records"]) for k in keys if not MANIFEST[k].get("deleted"))


def fates(key: str) -> Counter[str]:
    return Counter(r["fate"] for r in MANIFEST[key]["records"])


def sent(key: str) -> int:
    f = fates(key)
    return sum(f.values()) - f["skipped"] - f["withdrawn"]


def test_hostile_corpus_every_format(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mobile = {"mode": "update", "window": "1ms"}
    json_sink = DeletingCollectSink(tmp_path / "json" / "input" / "deleted.json")
    text_sink = DeletingCollectSink(tmp_path / "text" / "input" / "deleted.txt")
    delete_in_the_ingest_stage(monkeypatch, json_sink, text_sink)
    runs = {
        "json": PipelineHarness(spark, "mobile", tmp_path / "json", sink=json_sink, **mobile),
        "csv": PipelineHarness(spark, MobileCsv(), tmp_path / "csv", format="csv", **mobile),
        "numbers": PipelineHarness(spark, NumbersPipeline(), tmp_path / "numbers"),
        "text": PipelineHarness(
            spark, "wordcount", tmp_path / "text", sink=text_sink, mode="update"
        ),
    }
    numbers_in = runs["numbers"].inputs
    landed = {
        "json": land(runs["json"].input, keys("json/")),
        "csv": land(runs["csv"].input, keys("csv/")),
        "numbers.json": land(numbers_in["json"], [k for k in keys("numbers/") if "json" in k]),
        "numbers.csv": land(numbers_in["csv"], [k for k in keys("numbers/") if "csv" in k]),
        "text": land(runs["text"].input, keys("text/")),
    }
    assert set().union(*[set(v.values()) for v in landed.values()]) == set(MANIFEST)
    try:
        for run in runs.values():
            run.start()
        for run in runs.values():
            run.process()
        out = {name: collected(run) for name, run in runs.items()}
        quarantines = {
            "json": quarantined(spark, runs["json"].prepared.inputs["actions"].quarantine),
            "csv": quarantined(spark, runs["csv"].prepared.inputs["actions"].quarantine),
            "numbers": quarantined(spark, runs["numbers"].prepared.inputs["json"].quarantine)
            + quarantined(spark, runs["numbers"].prepared.inputs["csv"].quarantine),
        }
        totals = {name: run.totals for name, run in runs.items()}
        failed = {q.name: q.exception() for run in runs.values() for q in queries(run).values()}
    finally:
        for run in runs.values():
            run.stop()
    assert json_sink.deleted_in == 0 and text_sink.deleted_in == 0
    # the late-row dead-letter (written by the time a run stops): late records by file
    dead = {
        run: Counter(
            Path(json.loads(line)["source"]).name
            for path in (runs[run].prepared.settings.late_root / "counts").glob("batch-*.jsonl")
            for line in path.read_text().splitlines()
        )
        for run in ("json", "csv")
    }
    assert not any(failed.values()), failed
    by_source: dict[str, list[dict[str, Any]]] = {}
    for rows in quarantines.values():
        for row in rows:
            by_source.setdefault(Path(row["source"]).name, []).append(row)
    assert set(by_source) <= {n for v in landed.values() for n in v}

    # mobile (json, csv): each accepted record is one (window_start = ts, action) row
    for run in ("json", "csv"):
        got = Counter()
        for row in out[run]:
            got[(ts(row["window_start"]), row["action"])] = row["count"]
        want = Counter(
            (ts(r["ts"]), r["action"])
            for key in landed[run].values()
            for r in MANIFEST[key]["records"]
            if r["fate"] == "accepted"
        )
        assert got == want, run
        actions = {action for _, action in got}
        query = totals[run][f"{runs[run].pipeline.name}.counts"]
        valid_total = quarantined_total = late_total = 0
        for name, key in landed[run].items():
            records = MANIFEST[key]["records"]
            valid = sum(r["fate"] == "accepted" and r["action"] in actions for r in records)
            rejected = check_quarantine(key, by_source.get(name, []))
            # a late record is neither in the output nor in the quarantine
            absent = [r for r in records if r["fate"] == "late"]
            assert not any(r["action"] in actions for r in absent), key
            late = dead[run][name]  # the records in the dead-letter
            assert late == len(absent), key
            assert valid + rejected + late + 0 == sent(key), key  # no duplicates: mobile keeps them
            valid_total += valid
            quarantined_total += rejected
            late_total += late
        assert query["quarantined"] == quarantined_total, run
        assert query["late"] == late_total == sum(dead[run].values()), run
        assert query["duplicates"] == 0
        assert query["rows"] == lines_read(landed[run].values()), run
        total_sent = sum(sent(k) for k in landed[run].values())
        reconciled = valid_total + query["quarantined"] + late_total + query["duplicates"]
        assert reconciled == total_sent, run

    # numbers: the accepted rows exactly, values and all
    want_rows = sorted(
        (r["id"], r["n"], r["x"], ts(r["ts"]))
        for key in ("numbers/int_range.json", "numbers/double_range.json", "numbers/range.csv")
        for r in MANIFEST[key]["records"]
        if r["fate"] == "accepted"
    )
    got_rows = sorted((r["id"], r["n"], r["x"], ts(r["ts"])) for r in out["numbers"])
    assert got_rows == want_rows
    for name, key in {**landed["numbers.json"], **landed["numbers.csv"]}.items():
        valid = sum(r["fate"] == "accepted" for r in MANIFEST[key]["records"])
        assert valid + check_quarantine(key, by_source.get(name, [])) == sent(key), key
    numbers = [*landed["numbers.json"].values(), *landed["numbers.csv"].values()]
    assert len(got_rows) + len(quarantines["numbers"]) == sum(sent(k) for k in numbers)
    # Spark counts every line it read, the CSV header too
    assert totals["numbers"]["hostile_numbers.rows"]["rows"] == lines_read(numbers)

    # text: every line is a record; the words of the lines read, the deleted file's none
    words = Counter(
        w
        for key in landed["text"].values()
        for r in MANIFEST[key]["records"]
        if r["fate"] == "accepted"
        for w in r["words"]
    )
    got_words = {row["word"]: row["count"] for row in out["text"]}
    assert got_words == dict(words)
    text_sent = sum(sent(k) for k in landed["text"].values())
    assert totals["text"]["wordcount.counts"]["rows"] == text_sent


def collected(harness: PipelineHarness) -> list[dict[str, Any]]:
    """Every row the first output's collect sink received (one batch holds all the data)."""
    sink = harness.prepared.primary.sink
    assert isinstance(sink, CollectSink)
    return [row for batch in sorted(sink.batches) for row in sink.batches[batch]]


def queries(harness: PipelineHarness) -> dict[str, Any]:
    assert harness.run is not None
    return harness.run.queries
