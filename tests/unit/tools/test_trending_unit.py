"""Trending, mostly without Spark: settings validation, the plan, expectations, metric parsing
from a recorded progress JSON, the read-side query, the `generate` command and the demo's pieces
(the one test that asks Spark for the plans carries the `spark` mark)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sqlite3
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.app import cli
from slipstream.errors import CODES, ConfigError, ValidationError
from slipstream.ingest.expectations import Expectation, as_expectation_failure, check_expectations
from slipstream.monitor.listener import progress_summary
from slipstream.monitor.totals import RunTotals
from slipstream.runtime import runner
from slipstream.runtime.explain import explain
from slipstream.settings.config import load_settings
from slipstream.testing import article_views_db
from slipstream.tools.generators.trending import TrendingSpec, write_catalog
from slipstream.tools.serving import top_articles


@pytest.fixture
def landing(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "in").mkdir()
    catalog = write_catalog(tmp_path / "catalog.csv", TrendingSpec(articles=5))
    return {"input": tmp_path / "in", "catalog": catalog, "state_dir": tmp_path / "state"}


def _prepare(flags: dict[str, Any]) -> runner.Prepared:
    """Settings as a test names them: run settings, trending's parameters and its catalog."""
    flags = dict(flags)
    params = {k: flags.pop(k) for k in ("window", "slide", "watermark") if k in flags}
    paths = [str(flags.pop("input"))]
    catalog = flags.pop("catalog")
    if catalog is not None:
        paths.append(f"catalog={catalog}")
    return runner.prepare(
        load_settings("trending", {**flags, "input": paths}, environ={}, params=params)
    )


# --- settings and plan ------------------------------------------------------------------------


@pytest.mark.spark
def test_defaults_plan_and_explanation(spark: SparkSession, landing: dict[str, Any]) -> None:
    prepared = _prepare(landing)
    params = prepared.params
    assert (params.window, params.slide, params.watermark) == (
        timedelta(minutes=10),
        timedelta(minutes=1),
        timedelta(minutes=10),
    )
    views = prepared.outputs["views"]
    assert views.ctx.mode == "update" and views.sink.spec.kind == "sqlite"
    assert views.ctx.table == "article_views"
    assert views.ctx.key == ("window_start", "article_id")
    assert list(prepared.outputs) == ["views"]  # archive: off by default; no quarantine query
    runner.build(spark, prepared)  # reads each output's plan from Spark
    plan = prepared.plans["views"]
    assert plan.dedup and plan.stream_static_join and plan.aggregation
    assert (plan.window, plan.window_column, plan.watermark_column) == ("sliding", "ts", "ts")
    assert plan.window_slide == timedelta(minutes=1)
    assert plan.window_length == timedelta(minutes=10)
    text = explain(prepared)
    for words in (
        "DeduplicateWithinWatermark",
        "window      sliding 10m every 1m on ts",
        "join        stream-static",
        "watermark   ts - 10m",
        "guard     ts: at most 24h after the batch's time, no lower bound",
        "article_id_format (drop)",
        "user_id_present (warn)",
        "params      window=10m, slide=1m, watermark=10m",
    ):
        assert words in text


@pytest.mark.parametrize(
    ("flags", "code", "named"),
    [
        ({"slide": "15m"}, "CONFIG_BAD_VALUE", "--slide"),
        ({"window": "10m", "slide": "5s"}, "CONFIG_BAD_VALUE", "--slide"),
        ({"catalog": None}, "CONFIG_MISSING", "catalog"),
        ({"mode": "complete"}, "MODE_NOT_SUPPORTED", "--mode"),
        ({"sink": "parquet:/tmp/x"}, None, None),  # append by default: fine
        ({"sink": "parquet:/tmp/x", "mode": "update"}, "FILE_SINK_APPEND_ONLY", "--mode"),
        (
            # a bare file sink puts each output in its own folder under it: views in /tmp/x/views
            {"sink": ["parquet:/tmp/x", "archive=parquet:/tmp/x/views"]},
            "CONFIG_BAD_VALUE",
            "outputs views and archive both write to",
        ),
    ],
)
def test_settings_are_refused_before_spark_naming_the_key(
    landing: dict[str, Any], flags: dict[str, Any], code: str | None, named: str | None
) -> None:
    merged = {**landing, **flags}
    if code is None:
        assert _prepare(merged).outputs["views"].ctx.mode == "append"
        return
    with pytest.raises((ConfigError, ValidationError)) as caught:
        _prepare(merged)
    assert caught.value.code == code
    assert named in caught.value.message + caught.value.fix


def test_catalog_problems_are_refused(tmp_path: Path, landing: dict[str, Any]) -> None:
    hidden = tmp_path / "_catalog.csv"
    hidden.write_text("article_id,title,section,published_at\na1,T,s,\n")
    twice = tmp_path / "twice.csv"
    twice.write_text("article_id,title,section,published_at\na1,T,s,\na1,U,s,\n")
    header = tmp_path / "header.csv"
    header.write_text("id,name\na1,T\n")
    for path, words in ((hidden, "hidden"), (twice, "twice"), (header, "header")):
        with pytest.raises(ConfigError) as caught:
            _prepare({**landing, "catalog": path})
        assert caught.value.code == "CONFIG_BAD_VALUE" and words in caught.value.message


@pytest.mark.spark
def test_check_command_reads_every_output_from_spark(
    spark: SparkSession, landing: dict[str, Any]
) -> None:
    out = io.StringIO()
    argv = ["check", "trending", "--input", str(landing["input"]), "--input"]
    argv += [f"catalog={landing['catalog']}", "--state-dir", str(landing["state_dir"])]
    assert cli.main([*argv, "--sink", "archive=parquet:a"], out) == 0
    text = out.getvalue()
    assert "output      archive: append to parquet files in a" in text
    assert text.count("join        stream-static") == 2  # views and archive, read from Spark
    assert "ok: no rule refuses these queries" in text
    out = io.StringIO()  # the archive in update mode: refused, naming the rule and the output
    assert cli.main([*argv, "--sink", "archive=sqlite:", "--mode", "archive=update"], out) == 2
    assert "refused [MODE_NOT_SUPPORTED] output trending.archive" in out.getvalue()


# --- expectations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "has space", "condition": "x > 0"},
        {"name": "ok", "condition": "x > 0", "on_fail": "explode"},
        {"name": "ok", "condition": "  "},
        {"name": "ok", "condition": 42},
    ],
)
def test_badly_declared_expectations_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        Expectation(**kwargs)
    assert caught.value.code == "EXPECTATION_INVALID"


def test_an_expectation_is_described_with_its_condition_and_its_words() -> None:
    """The header, `check` and a `fail` rule's error show the description beside the rule."""
    assert Expectation("positive", "x > 0", "drop").describe() == "positive (drop): x > 0"
    described = Expectation("positive", "x > 0", "drop", description="an amount is positive")
    assert described.describe() == "positive (drop): x > 0 (an amount is positive)"
    column = Expectation("positive", lambda: None, "warn", description="an amount is positive")  # type: ignore[arg-type,return-value]
    assert column.describe() == "positive (warn): an amount is positive"
    assert Expectation("positive", lambda: None).describe() == "positive (warn)"  # type: ignore[arg-type,return-value]


def test_expectation_names_are_unique_and_failures_are_recognised() -> None:
    rule = Expectation("positive", "x > 0", "drop")
    assert rule.reason == "expectation positive failed"
    with pytest.raises(ConfigError, match="two expectations"):
        check_expectations([rule, Expectation("positive", "x >= 0")])
    spark_text = (
        "[STREAM_FAILED] Query terminated with exception: [USER_RAISED_EXCEPTION] "
        "[EXPECTATION_FAILED] expectation no_a999 failed (no_a999 (fail): article_id <> "
        '\'a999\') on: {"event_id": "bad"} SQLSTATE: P0001\n at ...'
    )
    failure = as_expectation_failure(RuntimeError(spark_text))
    assert failure is not None and failure.code == "EXPECTATION_FAILED"
    assert failure.message.startswith("expectation no_a999 failed") and "SQLSTATE" not in (
        failure.message
    )
    assert as_expectation_failure(RuntimeError("disk full")) is None
    assert "EXPECTATION_FAILED" in CODES and "EXPECTATION_INVALID" in CODES


# --- metrics from a recorded progress JSON ----------------------------------------------------

# Shape of a real `trending.views` progress (Spark 4.3), trimmed to what slipstream reads.
PROGRESS = {
    "name": "trending.views",
    "batchId": 2,
    "numInputRows": 500,
    "inputRowsPerSecond": 166.6,
    "processedRowsPerSecond": 68.2,
    "durationMs": {"triggerExecution": 7330},
    "eventTime": {"watermark": "2025-12-31T23:50:01.998Z"},
    "stateOperators": [
        {
            "operatorName": "stateStoreSave",
            "numRowsTotal": 2400,
            "numRowsDroppedByWatermark": 0,
            "customMetrics": {},
        },
        {
            "operatorName": "dedupeWithinWatermark",
            "numRowsTotal": 908,
            "numRowsDroppedByWatermark": 9,
            "customMetrics": {"numDroppedDuplicateRows": 12},
        },
    ],
    "observedMetrics": {
        "quality": {"input": 500, "quarantined": 4},
        "expectations": {"ts_not_in_future": 1, "article_id_format": 0, "user_id_present": 2},
    },
}


def test_progress_summary_counts_late_duplicates_and_rules() -> None:
    s = progress_summary(PROGRESS)
    assert (s["late"], s["duplicates"], s["quarantined"], s["state_rows"]) == (9, 12, 4, 3308)
    assert s["expectations"] == {
        "ts_not_in_future": 1,
        "article_id_format": 0,
        "user_id_present": 2,
    }
    totals = RunTotals()
    for batch in (2, 3):
        totals(
            {
                "event": "progress",
                "query": "trending.views",
                "progress": {**PROGRESS, "batchId": batch},
            }
        )
    t = totals.by_query["trending.views"]
    assert (t["late"], t["duplicates"], t["expectations"]["user_id_present"]) == (18, 24, 4)


def test_progress_summary_counts_the_duplicates_of_a_dedup_by_timers() -> None:
    """A transformWithState reports no duplicates: 10 rows went into the processor, 6 came out
    and 1 was late (dropped by its operator before the processor): 3 duplicates, beside an
    aggregation's late partial aggregates that are not subtracted."""
    progress = {
        "batchId": 4,
        "numInputRows": 12,
        "stateOperators": [
            {"operatorName": "stateStoreSave", "numRowsDroppedByWatermark": 2},
            {"operatorName": "transformWithStateExec", "numRowsDroppedByWatermark": 1},
        ],
        "observedMetrics": {
            "dedup_timers.in.0": {"rows": 10},
            "dedup_timers.out.0": {"rows": 6},
            "quality": {"input": 12, "quarantined": 2},
        },
    }
    s = progress_summary(progress)
    assert (s["duplicates"], s["late"], s["late_aggregates"]) == (3, 3, 2)
    assert progress_summary({**progress, "observedMetrics": {}})["duplicates"] == 0


# --- the read side ----------------------------------------------------------------------------


def _row(start_min: int, article: str, views: int, known: bool = True) -> tuple[Any, ...]:
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=start_min)
    end = start + timedelta(minutes=10)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    title = f"title {article}" if known else None
    return (start.strftime(fmt), end.strftime(fmt), article, title, "tech", views, known)


def _top_by_full_scan(db: Path, now: datetime) -> dict[str, str | None]:
    """The windows top_articles must choose, from every row (the reference: no index range)."""
    with sqlite3.connect(db) as conn:
        pairs = set(conn.execute("SELECT window_start, window_end FROM article_views"))
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    windows = [(parse(s), parse(e), s) for s, e in pairs]
    length = max(windows)[1] - max(windows)[0]
    windows = [w for w in windows if w[1] - w[0] == length]
    open_ = [w for w in windows if w[0] <= now < w[1]]
    closed = [w for w in windows if w[1] <= now]
    return {
        "current": min(open_, key=lambda w: w[1])[2] if open_ else None,
        "latest_complete": max(closed, key=lambda w: w[1])[2] if closed else None,
    }


def _stored(t: datetime) -> str:
    """A time as the sinks store it: whole seconds `...:SSZ`, fractions `...:SS.ffffffZ`."""
    whole = t.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{t.microsecond:06d}Z" if t.microsecond else f"{whole}Z"


def test_top_articles_reads_an_index_range_yet_chooses_as_a_full_scan(tmp_path: Path) -> None:
    # windows of 90.5 s sliding by 30.25 s (a fraction sorts '.' before a whole second's 'Z'),
    # with an hour without data in the middle
    t0, slide, length = (
        datetime(2026, 1, 1, tzinfo=UTC),
        timedelta(seconds=30.25),
        timedelta(seconds=90.5),
    )
    rows = [
        (_stored(t0 + i * slide), _stored(t0 + i * slide + length), a, a, "x", v + i, True)
        for i in [*range(0, 40), *range(160, 200)]
        for a, v in (("a1", 1), ("a2", 5))
    ]
    db = article_views_db(tmp_path / "v.db", rows)
    for now in [t0 + timedelta(seconds=7 * k) for k in range(1000)]:
        tops = top_articles(db, n=1, now=now)
        got = {k: (v[0]["window_start"] if v else None) for k, v in tops.items()}
        assert got == _top_by_full_scan(db, now), now
    assert top_articles(db, n=1)["current"][0]["window_start"] == _stored(t0 + 197 * slide)


def test_top_articles_current_and_latest_complete(tmp_path: Path) -> None:
    # windows of 10 min sliding by 1 min; the latest start is 00:12, so the latest event time is
    # in [00:12, 00:13): current = the window ending 00:13, latest complete = ending 00:12
    rows = [_row(m, a, v) for m in range(0, 13) for a, v in (("a1", 10 + m), ("a2", 20 - m))]
    rows.append(_row(3, "a9", 15, known=False))
    db = article_views_db(tmp_path / "v.db", rows)
    tops = top_articles(db, n=2)
    assert [(r["window_end"], r["article_id"], r["views"], r["rank"]) for r in tops["current"]] == [
        ("2026-01-01T00:13:00Z", "a2", 17, 1),
        ("2026-01-01T00:13:00Z", "a9", 15, 2),
    ]
    assert tops["current"][1]["in_catalog"] is False
    assert [(r["window_end"], r["article_id"]) for r in tops["latest_complete"]] == [
        ("2026-01-01T00:12:00Z", "a2"),
        ("2026-01-01T00:12:00Z", "a1"),
    ]
    # anchored on a clock: 00:11:30 lies in the windows ending 00:12 .. 00:21
    at = top_articles(db, n=1, now=datetime(2026, 1, 1, 0, 11, 30, tzinfo=UTC))
    assert at["current"][0]["window_end"] == "2026-01-01T00:12:00Z"
    assert at["latest_complete"][0]["window_end"] == "2026-01-01T00:11:00Z"


def test_top_articles_before_anything_is_written(tmp_path: Path) -> None:
    assert top_articles(tmp_path / "none.db") == {"current": [], "latest_complete": []}
    sqlite3.connect(tmp_path / "empty.db").close()
    assert top_articles(tmp_path / "empty.db") == {"current": [], "latest_complete": []}


# --- `slipstream generate trending` -----------------------------------------------------------


def _digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.glob("views-*.jsonl")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def test_generate_command_writes_catalog_files_and_report(tmp_path: Path) -> None:
    out = io.StringIO()
    argv = ["generate", "trending", "--out", str(tmp_path / "a"), "--events", "700"]
    argv += ["--rate", "200", "--seed", "9", "--late", "0.05", "--malformed", "0.04"]
    assert cli.main(argv, out) == 0
    report = json.loads((tmp_path / "a_generation-report.json").read_text())
    assert report["total_lines"] == 700 and report["files"] == 4
    assert report["spec"]["late"] == 0.05 and report["spec"]["seed"] == 9
    assert (
        report["total_lines"]
        == report["valid_unique"] + report["duplicates"] + (report["malformed"])
    )
    assert (tmp_path / "catalog.csv").read_text().startswith("article_id,title,section")
    printed = out.getvalue()
    assert '"total_lines": 700' in printed and "catalog " + str(tmp_path / "catalog.csv") in printed
    # same seed, same bytes
    argv[3] = str(tmp_path / "b")
    assert cli.main(argv + ["--quiet"], io.StringIO()) == 0
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--events", "10", "--late", "1.5"], "late"),
        (["--events", "10", "--rate", "fast"], "--rate"),
        (["--duration", "soon"], "--duration"),
        (["--events", "10", "--start", "yesterday"], "--start"),
    ],
)
def test_generate_command_refuses_bad_values_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], flag: str
) -> None:
    argv = ["generate", "trending", "--out", str(tmp_path / "x"), *extra]
    assert cli.main(argv, io.StringIO()) == 2
    assert flag in capsys.readouterr().err


def test_generate_command_refuses_a_directory_with_event_files(tmp_path: Path) -> None:
    argv = ["generate", "trending", "--out", str(tmp_path), "--events", "10", "--quiet"]
    assert cli.main(argv, io.StringIO()) == 0
    assert cli.main(argv, io.StringIO()) == 2


def test_live_generation_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    """The demo's generator child: paced, stopped by SIGINT after its current file."""
    from slipstream.tools.demo_trending import start_generator, stop_generator

    landing = tmp_path / "in"
    child = start_generator(
        landing, tmp_path / "c.csv", tmp_path / "r.json", tmp_path / "g.log", 500.0, 3
    )
    try:
        # wait (bounded) until the child is pacing: its first event file has appeared
        deadline = datetime.now(UTC) + timedelta(seconds=60)
        while not list(landing.glob("views-*.jsonl")) and datetime.now(UTC) < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(0.05)
            assert child.poll() is None, (tmp_path / "g.log").read_text()
    finally:
        code = stop_generator(child)
    assert code == 0, (tmp_path / "g.log").read_text()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["interrupted"] is True and report["files"] >= 1
    assert len(list(landing.glob("views-*.jsonl"))) == report["files"]
    assert not list(landing.glob(".*.tmp")), "no temporary file is left behind"


# --- the demo's terminal view -----------------------------------------------------------------


def test_demo_view_renders_the_top_ten(tmp_path: Path) -> None:
    from slipstream.tools.demo_view import TopView

    rows = [_row(0, f"a{i}", 100 - i) for i in range(12)] + [_row(0, "a99", 1, known=False)]
    db = article_views_db(tmp_path / "v.db", rows)
    out = io.StringIO()
    view = TopView(db, out, n=10, rate=2000)
    view({"event": "progress", "query": "trending.views", "progress": PROGRESS})
    text = out.getvalue()
    assert "top 10 of the current window 00:00:00-00:10:00" in text
    assert "batch 2: 500 events" in text and "late 9" in text and "duplicates 12" in text
    assert "a0 " in text and "a9 " in text and "a10 " not in text
    assert view.throughput()["events"] == 500


def test_the_demo_prunes_landing_files_every_query_has_long_read(tmp_path: Path) -> None:
    import os

    from slipstream.tools.demo_trending import LandingJanitor
    from slipstream.tools.demo_view import RESULTS_QUERY

    now = time.time()
    ages = {"old.jsonl": 3600, "edge-old.jsonl": 1801, "edge-new.jsonl": 1799, "new.jsonl": 5}
    for name in [*ages, ".tmp-old.jsonl", "_spark_metadata"]:
        (tmp_path / name).write_text("{}\n")
        os.utime(tmp_path / name, (now - ages.get(name, 7200),) * 2)
    janitor = LandingJanitor(tmp_path, keep_s=1800, every_s=0)
    janitor({"event": "progress", "query": "trending.quarantine.events", "progress": PROGRESS})
    assert len(list(tmp_path.iterdir())) == 6  # only the results query's batches prune
    janitor({"event": "progress", "query": RESULTS_QUERY, "progress": PROGRESS})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".tmp-old.jsonl", "_spark_metadata", "edge-new.jsonl", "new.jsonl",
    ]  # fmt: skip
    assert janitor.removed == 2
