"""temperature_load, seed 003's stream-stream join: the time range's edges, a left-outer row
that appears only once the watermark proves no load can come (and only once), buffers that
stop growing, the whole generated stream against pandas, and what `check` says it buffers.

Batch boundaries are controlled (one file per stream per batch); nothing waits by sleeping."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from slipstream.tools.generators import temperature_load as generator
from slipstream.tools.generators.streams import generate
from tests import stream_reference as ref
from tests.helpers import T0, check_in_process, iso_at
from tests.join_reference import temperature_load_pairs, temperature_load_reading

pytestmark = pytest.mark.spark


def _out(minutes: float) -> str:
    """A time as the sink writes it."""
    return ref.iso_exact(T0 + timedelta(minutes=minutes))


def temp(location: str, minutes: float, value: float = 20.0) -> str:
    return json.dumps({"location_id": location, "temp": value, "temp_taken_time": iso_at(minutes)})


def load(location: str, minutes: float, value: float = 0.5) -> str:
    return json.dumps({"location_id": location, "load": value, "load_taken_time": iso_at(minutes)})


def _pairs(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {(r["location_id"], r["temp_taken_time"], r["load_taken_time"]) for r in rows}


def test_the_join_matches_at_both_edges_of_the_hour_and_nothing_just_outside(
    spark: SparkSession, tmp_path: Path
) -> None:
    ms = 1 / 60_000  # one millisecond, in minutes
    h = PipelineHarness(spark, "temperature_load", tmp_path, trigger="available-now")
    h.feed([temp("a", 60), temp("b", 60)], input="temperature")
    h.feed(
        [
            load("a", 60),  # at the temperature: the lower edge, inclusive
            load("a", 120),  # one hour after: the upper edge, inclusive
            load("a", 60 - ms),  # just before
            load("a", 120 + ms),  # just after
            load("b", 90),  # inside, another location
            load("c", 90),  # inside the hour, no temperature at c
        ],
        input="load",
    )
    with h:  # available-now: the run takes what has landed when it starts
        rows = h.process()
    assert _pairs(rows) == {
        ("a", _out(60), _out(60)),
        ("a", _out(60), _out(120)),
        ("b", _out(60), _out(90)),
    }


def test_a_temperature_without_load_is_written_once_when_the_watermark_passes_its_hour(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Left outer. The watermark is the slower input's: min(newest temp - 1h, newest load -
    2h). A temperature can still meet a load until that watermark passes its time + 1h."""
    with PipelineHarness(
        spark, "temperature_load", tmp_path, join="left_outer", max_files_per_trigger=1
    ) as h:
        h.feed([temp("a", 0), temp("b", 0)], input="temperature")
        h.feed([load("b", 30)], input="load")
        first = h.process()
        assert _pairs(first) == {("b", ref.iso(T0), _out(30))}
        # newest temp 01:50, newest load 02:50: watermark min(00:50, 00:50) = 00:50 < 01:00
        h.feed([temp("z", 110)], input="temperature")
        h.feed([load("z", 170)], input="load")
        assert [r for r in h.process() if r["location_id"] == "a"] == []
        # newest temp 02:30, newest load 03:30: watermark 01:30, past a's 00:00 + 1h
        h.feed([temp("z", 150)], input="temperature")
        h.feed([load("z", 210)], input="load")
        rows = h.process()
        unmatched = [r for r in rows if r["load_taken_time"] is None]
        assert [(r["location_id"], r["temp_taken_time"]) for r in unmatched] == [("a", ref.iso(T0))]
        assert unmatched[0]["load"] is None and unmatched[0]["temp"] == 20.0
        assert list(unmatched[0]) == [
            "location_id", "temp", "temp_taken_time", "load", "load_taken_time"
        ]  # fmt: skip
        # later batches never write it again, and b (matched) never gets a NULL row; rows
        # that come too late for the join are dropped and counted: a temperature at or before
        # the previous watermark - 1h (00:30), a load at or before it (01:30)
        h.feed([temp("z", 400), temp("late", 10)], input="temperature")
        h.feed([load("z", 460), load("late", 60)], input="load")
        later = h.process()
        assert all(r["location_id"] == "z" for r in later)
        assert h.totals["temperature_load.temperature_load"]["late"] == 2


def test_the_generated_stream_joins_as_pandas_does_and_the_buffers_stop_growing(
    spark: SparkSession, tmp_path: Path
) -> None:
    # 9 hours in 30-minute files (18 batches), with out-of-order and malformed rows
    spec = replace(
        generator.DEFAULTS, duration=timedelta(hours=9), file_every=timedelta(minutes=30)
    )
    report = generate(spec, generator.Locations(6), tmp_path / "landing")
    files = {
        s: sorted((tmp_path / "landing" / s).glob(f"{s}-*.jsonl")) for s in ("temperature", "load")
    }
    spans = max(int(p.stem.rsplit("-", 1)[1]) for f in files.values() for p in f) + 1
    with PipelineHarness(spark, "temperature_load", tmp_path, max_files_per_trigger=1) as h:
        for span in range(spans):  # both streams' files of one span of arrival time together
            for stream in ("temperature", "load"):
                path = tmp_path / "landing" / stream / f"{stream}-{span:08d}.jsonl"
                h.feed(path.read_text().splitlines() if path.exists() else [], input=stream)
        rows = h.process()
        assert h.run is not None
        progress = h.progress("temperature_load")
        totals = h.totals["temperature_load.temperature_load"]
        quarantined = {
            s: [
                r.asDict()
                for r in read_quarantine(spark, h.prepared.inputs[s].quarantine).collect()
            ]
            for s in ("temperature", "load")
        }
    malformed = sum(c.malformed for c in report.streams.values())
    assert totals["quarantined"] == malformed > 0
    sent = sum(c.lines for c in report.streams.values())
    assert totals["rows"] == sent

    parsed: dict[str, list[dict[str, Any]]] = {}
    for stream in ("temperature", "load"):
        lines = [x for p in files[stream] for x in p.read_text().splitlines()]
        read = [temperature_load_reading(stream, x) for x in lines]
        parsed[stream] = [r for r in read if r is not None]
        # each input's quarantine holds exactly its own lines the independent parse rejects
        rejected = [x for x, r in zip(lines, read, strict=True) if r is None]
        assert sorted(r["raw"] for r in quarantined[stream]) == sorted(rejected)
        assert len(rejected) == report.streams[stream].malformed  # this seed: none in load
    # valid + quarantined + late + duplicates = sent (no late or duplicate rows generated)
    valid = len(parsed["temperature"]) + len(parsed["load"])
    assert valid + totals["quarantined"] + totals["late"] + totals["duplicates"] == sent
    assert totals["late"] == totals["duplicates"] == 0
    expected = temperature_load_pairs(parsed["temperature"], parsed["load"])
    assert len(rows) == len(expected) > 0 and _pairs(rows) == expected
    # buffered rows, read from progress: about 3h of temperatures and 2h of loads, not 12h
    state = [
        next(o["numRowsTotal"] for o in p["stateOperators"] if "Join" in o["operatorName"])
        for p in progress
        if p.get("stateOperators") and p["numInputRows"] > 0
    ]
    third = len(state) // 3
    assert max(state[-third:]) <= 1.25 * max(state[third : 2 * third])
    assert max(state) < 0.5 * valid


def test_check_prints_how_long_each_side_is_buffered(spark: SparkSession, tmp_path: Path) -> None:
    """`slipstream check`, parsed by the CLI's parser, on the test session (no JVM of its own)."""
    text = check_in_process(
        spark, "temperature_load", tmp_path, "--input", f"temperature={tmp_path / 't'}",
        "--input", f"load={tmp_path / 'l'}", "--join", "left_outer",
    )  # fmt: skip
    assert "join        stream-stream LeftOuter (bounded by watermarks)" in text
    assert (
        "buffer      left (temp_taken_time): a row is held until the watermark passes "
        "temp_taken_time + 1h: about 3h of event time behind the newest input"
    ) in text
    assert (
        "buffer      right (load_taken_time): a row is held until the watermark passes "
        "load_taken_time: about 2h of event time behind the newest input"
    ) in text


def test_the_buffers_check_prints_follow_the_watermarks_and_the_time_bound(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Other values than the seed's: watermarks 20m and 45m, loads within 30m. The query keeps
    the slower watermark (45m): a temperature is held until it passes temp_taken_time + 30m,
    about 45m + 30m behind the newest input; a load about 45m."""
    text = check_in_process(
        spark, "temperature_load", tmp_path, "--input", f"temperature={tmp_path / 't'}",
        "--input", f"load={tmp_path / 'l'}", "--temp-watermark", "20m",
        "--load-watermark", "45m", "--within", "30m",
    )  # fmt: skip
    assert "join        stream-stream Inner (bounded by watermarks)" in text
    assert (
        "buffer      left (temp_taken_time): a row is held until the watermark passes "
        "temp_taken_time + 30m: about 75m of event time behind the newest input"
    ) in text
    assert (
        "buffer      right (load_taken_time): a row is held until the watermark passes "
        "load_taken_time: about 45m of event time behind the newest input"
    ) in text
