"""Every rule `check` and `run` enforce before a query starts, by its stable code (no Spark)."""

from __future__ import annotations

import inspect
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from slipstream.analysis import validate
from slipstream.analysis.plan import Plan
from slipstream.analysis.validate import violations
from slipstream.core.specs import SinkSpec, TriggerSpec
from slipstream.errors import CODES, ValidationError
from slipstream.runtime import runner
from slipstream.settings.config import load_settings
from tests.helpers import REPO

AGG = Plan(steps=("groupBy(word).count()",), aggregation=True)
WINDOWED = Plan(
    steps=("window",),
    aggregation=True,
    window="tumbling",
    window_column="ts",
    watermark_column="ts",
    watermark_delay=timedelta(minutes=10),
)
STATELESS = Plan(steps=("select",))
SQLITE = SinkSpec("sqlite")
DEFAULT = TriggerSpec()


def codes(
    plan: Plan,
    mode: str = "update",
    sink: SinkSpec = SQLITE,
    trigger: TriggerSpec = DEFAULT,
    source: str = "files",
) -> list[str]:
    return [v.code for v in violations(plan, mode, sink, trigger, source)]  # type: ignore[arg-type]


def test_file_sinks_take_append_only() -> None:
    for kind in ("parquet", "json", "csv"):
        assert codes(WINDOWED, "update", SinkSpec(kind, "/tmp/x")) == ["FILE_SINK_APPEND_ONLY"]
        assert codes(WINDOWED, "append", SinkSpec(kind, "/tmp/x")) == []


def test_complete_needs_aggregation() -> None:
    assert codes(STATELESS, "complete", SinkSpec("console")) == ["COMPLETE_NEEDS_AGGREGATION"]
    assert codes(AGG, "complete") == []


@pytest.mark.parametrize(
    "plan",
    [
        AGG,
        replace(WINDOWED, watermark_column=None, watermark_delay=None),
        replace(WINDOWED, watermark_column="arrived"),
        replace(WINDOWED, watermark_before_aggregation=False),
    ],
    ids=["no window", "no watermark", "watermark on another column", "watermark after"],
)
def test_append_on_aggregation_needs_window_and_watermark(plan: Plan) -> None:
    """Each plan is WINDOWED (which append takes) with one thing missing or out of place."""
    assert codes(WINDOWED, "append") == []
    assert codes(plan, "append") == ["APPEND_NEEDS_WATERMARK"]


def test_session_windows_refuse_update() -> None:
    session = Plan(
        steps=(), aggregation=True, window="session", window_column="ts", watermark_column="ts"
    )
    assert codes(session, "update") == ["SESSION_WINDOW_NO_UPDATE"]
    assert codes(session, "append") == []


@pytest.mark.parametrize("op", ["limit", "distinct", "sort"])
def test_limit_distinct_sort_without_aggregation(op: str) -> None:
    plan = Plan(steps=(op,), stream_ops=(op,))  # type: ignore[arg-type]
    assert codes(plan, "append", SinkSpec("console")) == ["UNSUPPORTED_STREAM_OPERATION"]


def test_sort_after_aggregation_needs_complete() -> None:
    plan = Plan(steps=(), aggregation=True, stream_ops=("sort",), ops_after_aggregation=True)
    assert codes(plan, "complete") == []
    assert codes(plan, "update") == ["SORT_NEEDS_COMPLETE"]


def test_continuous_trigger_eligibility() -> None:
    cont = TriggerSpec.parse("continuous:1s")
    assert codes(STATELESS, "append", SinkSpec("console"), cont, "rate") == []
    assert codes(AGG, "update", SinkSpec("console"), cont, "rate") == ["CONTINUOUS_NOT_ELIGIBLE"]
    assert codes(STATELESS, "append", SinkSpec("console"), cont, "files") == [
        "CONTINUOUS_NOT_ELIGIBLE"
    ]
    assert codes(STATELESS, "append", SQLITE, cont, "rate") == ["CONTINUOUS_NOT_ELIGIBLE"]


def test_real_time_trigger_eligibility(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Spark 4.3's real-time mode was seen to run (analysis/realtime.py): update mode from
    Kafka, stateless or aggregated, into console, foreach, kafka and the database sinks."""
    from slipstream.core import spark_line

    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    rt = TriggerSpec.parse("real-time:5s")
    assert codes(STATELESS, "update", SinkSpec("console"), rt, "kafka") == []
    assert codes(WINDOWED, "update", SinkSpec("sqlite"), rt, "kafka") == []
    assert codes(WINDOWED, "update", SinkSpec("postgresql"), rt, "kafka") == []
    assert codes(replace(WINDOWED, dedup=True), "update", SinkSpec("kafka"), rt, "kafka") == []
    refused = "REAL_TIME_NOT_ELIGIBLE"
    assert codes(STATELESS, "update", SinkSpec("console"), rt, "rate") == [refused]
    assert codes(STATELESS, "update", SinkSpec("memory"), rt, "kafka") == [refused]
    assert codes(STATELESS, "append", SinkSpec("console"), rt, "kafka") == [refused]
    assert codes(WINDOWED, "complete", SinkSpec("sqlite"), rt, "kafka") == [refused]
    within = replace(WINDOWED, dedup=True, dedup_within_watermark=True)
    assert codes(within, "update", SinkSpec("sqlite"), rt, "kafka") == [refused]


def test_real_time_blockers_name_each_cause() -> None:
    from slipstream.analysis.realtime import blockers, describe

    trending = replace(WINDOWED, dedup=True, dedup_within_watermark=True)
    found = blockers(trending, "append", "parquet", "files")
    assert [line.split(" ")[0] for line in found] == ["source", "sink", "--mode", "operator"]
    assert "dropDuplicatesWithinWatermark" in found[3]
    assert blockers(replace(STATELESS, python_map=True), "update", "kafka", "kafka") == [
        "operator mapInArrow / mapInPandas (a Python worker: "
        "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST)"
    ]
    assert describe(WINDOWED, "update", "sqlite", "kafka").startswith("yes: upserted on the")
    assert describe(WINDOWED, "append", "sqlite", "kafka").startswith("no: --mode append")


def test_real_time_slots() -> None:
    from slipstream.analysis.realtime import slot_blocker, slots_needed

    assert slots_needed(STATELESS, 3, 4) == 3  # no shuffle: a task per topic partition
    assert slots_needed(WINDOWED, 1, 4) == 5
    # a deduplication then an aggregation on other keys: two shuffles (sensors, trending);
    # Spark refused sensors' stats for 3 slots under one shuffle partition
    assert slots_needed(replace(WINDOWED, dedup=True), 1, 1) == 3
    assert slots_needed(replace(STATELESS, dedup=True), 2, 4) == 6
    assert slot_blocker({"m.counts": 2}, 0, 2) is None
    assert slot_blocker({"m.counts": 2}, 1, 3) is None
    assert slot_blocker({"m.counts": 2}, 1, 2) == (
        "the real-time queries hold 3 task slots at once (m.counts 2 + 1 for the 1 "
        "micro-batch query) and Spark has 2"
    )


def test_seed_append_on_running_count_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Refused before Spark starts, as a mode the output does not offer (the plan-based
    reason, APPEND_NEEDS_WATERMARK, is proven on Spark's own verdicts in test_plan_spark)."""
    settings = load_settings("wordcount", {"mode": "append", "input": tmp_path}, environ={})
    with pytest.raises(ValidationError) as err:
        runner.prepare(settings)
    assert err.value.code == "MODE_NOT_SUPPORTED"
    assert "wordcount.counts" in err.value.message and "complete, update" in err.value.message


def test_pipeline_plans_pass_their_own_modes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for mode in ("update", "complete"):
        runner.prepare(load_settings("mobile", {"mode": mode, "input": tmp_path}, environ={}))
        runner.prepare(load_settings("wordcount", {"mode": mode, "input": tmp_path}, environ={}))
    runner.prepare(
        load_settings(
            "mobile",
            {"mode": "append", "input": tmp_path, "sink": f"parquet:{tmp_path}/out"},
            environ={},
        )
    )
    with pytest.raises(ValidationError) as err:
        runner.prepare(
            load_settings(
                "mobile",
                {"mode": "update", "input": tmp_path, "sink": f"parquet:{tmp_path}/out"},
                environ={},
            )
        )
    assert err.value.code == "FILE_SINK_APPEND_ONLY"


def test_every_code_is_documented() -> None:
    """Every code a rule of analysis/validate.py gives is a row of the rules' table in
    docs/concepts/validation.md, and every row of that table is a code of the catalog with a
    meaning. (The whole catalog is the generated reference page, checked by test_docs_site.py.)"""
    given = set(re.findall(r'"([A-Z][A-Z_]+)"', inspect.getsource(validate))) & set(CODES)
    page = (REPO / "docs" / "concepts" / "validation.md").read_text()
    listed = set(re.findall(r"`([A-Z][A-Z_]+)`", "\n".join(re.findall(r"^\| `.+", page, re.M))))
    assert given >= {"APPEND_NEEDS_WATERMARK", "SINK_KEY_NULLABLE"}, given  # the scan reads them
    assert not given - listed, f"rules missing from docs/concepts/validation.md: {given - listed}"
    assert listed <= set(CODES), f"rows that are no code: {listed - set(CODES)}"
    assert all(CODES[c] for c in listed)


def test_kafka_without_a_broker_is_refused_before_start(monkeypatch) -> None:  # noqa: ANN001
    """The older flags bind the one stream input too; the topic is checked before Spark
    starts (tests/unit/sources/test_kafka_unit.py has the kafka:// URLs; Spark's connector, which
    Spark resolves from Maven Central, is tests/e2e/kafka/test_kafka.py's)."""
    from slipstream.errors import ConfigError
    from tests.services import free_port

    monkeypatch.setattr("slipstream.sources.kafka.CHECK_TIMEOUT_S", 1.0)
    settings = load_settings(
        "mobile",
        {"source": "kafka", "kafka_bootstrap": f"127.0.0.1:{free_port()}", "kafka_topic": "a"},
        environ={},
    )
    with pytest.raises(ConfigError) as err:
        runner.prepare(settings)
    assert err.value.code == "KAFKA_UNREACHABLE"


def test_parsed_input_is_not_eligible_for_continuous_but_is_for_real_time() -> None:
    """Spark refuses Generate and CollectMetrics under the continuous trigger; real-time mode
    runs them (measured: `inline` and `observe` from Kafka into a ForeachWriter)."""
    parsed = replace(STATELESS, quarantine=True)
    cont = TriggerSpec.parse("continuous:1s")
    rt = TriggerSpec.parse("real-time:5s")
    assert codes(parsed, "append", SinkSpec("console"), cont, "rate") == ["CONTINUOUS_NOT_ELIGIBLE"]
    assert codes(parsed, "update", SinkSpec("console"), rt, "kafka") == []
    assert codes(parsed, "append", SinkSpec("console"), TriggerSpec.parse("1s"), "rate") == []


def test_each_parsed_input_has_a_quarantine_folder_and_no_query_of_its_own() -> None:
    """The quarantine is written by the output that reads the input (ingest/quarantine.py):
    a run adds no query for it; the folder is among the places the run writes."""
    mobile = runner.prepare(load_settings("mobile", {}, environ={}), check_source=False)
    words = runner.prepare(load_settings("wordcount", {}, environ={}), check_source=False)
    assert mobile.parses and not words.parses
    assert mobile.inputs["actions"].quarantine == Path("state/quarantine/mobile/actions")
    assert list(mobile.outputs) == ["counts"]
    assert list(mobile.targets) == ["counts", "quarantine.actions"]
    assert list(words.outputs) == ["counts"] and list(words.targets) == ["counts"]


def _two_stream_run(trigger: TriggerSpec) -> tuple[runner.Prepared, list[runner.Query]]:
    """A run of one console output over two stream inputs: `a` from rate (which the
    continuous trigger reads), then `b` from files (which it does not)."""
    from types import SimpleNamespace

    from slipstream.api.pipeline import Input, Output
    from slipstream.runtime.bound import BoundInput, BoundOutput
    from slipstream.sinks.base import SinkContext
    from slipstream.sinks.spark_sinks import ConsoleSink
    from slipstream.sources.base import Binding
    from slipstream.sources.files import FilesSource
    from slipstream.sources.rate import RateSource

    inputs = {
        name: BoundInput(Input(name, format="text"), Binding(name, None, "text"), source)
        for name, source in (("a", RateSource()), ("b", FilesSource()))
    }
    ctx = SinkContext("two", "two.out", "out", (), "append", Path("unused"))
    out = BoundOutput(Output("out", sink="console"), ConsoleSink(SinkSpec("console")), ctx)
    settings = SimpleNamespace(trigger=trigger, remote=None)
    prepared = runner.Prepared(None, settings, {}, inputs, {"out": out}, plans={"out": STATELESS})  # type: ignore[arg-type]
    frame = SimpleNamespace(schema=SimpleNamespace(fields=[]))
    return prepared, [runner.Query(out, frame)]  # type: ignore[arg-type]


def test_the_continuous_rule_judges_every_input_an_output_reads_not_the_first_only() -> None:
    # `_source_of` judged the run's first input alone: rate passed, and the files input the
    # same output reads was never asked
    prepared, queries = _two_stream_run(TriggerSpec.parse("continuous:1s"))
    found = runner.check(prepared, queries)
    assert [v.code for v in found] == ["CONTINUOUS_NOT_ELIGIBLE"]
    assert "source files" in found[0].message and "source rate" not in found[0].message


def test_an_ingest_query_is_judged_on_the_input_it_reads() -> None:
    from slipstream.runtime.bound import BoundOutput, QueryKind

    prepared, _ = _two_stream_run(TriggerSpec.parse("continuous:1s"))
    sink, ctx = prepared.outputs["out"].sink, prepared.outputs["out"].ctx
    for name in ("a", "b"):
        drains = BoundOutput(
            None,
            sink,
            replace(ctx, query_name=f"two.q{name}"),
            reads=(name,),
            kind=QueryKind.INGEST,
        )
        prepared.outputs = {drains.name: drains}
        prepared.plans = {drains.name: STATELESS}
        found = runner.check(prepared, [runner.Query(drains, None)])  # type: ignore[arg-type]
        assert [v.code for v in found] == ([] if name == "a" else ["CONTINUOUS_NOT_ELIGIBLE"])


def test_real_time_state_needs_the_4_3_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the 4.2 line (slipstream[delta]) a real-time output that aggregates or deduplicates
    is refused before start, naming the line it needs; a stateless one runs; 4.3 takes both."""
    from slipstream.core import spark_line

    rt = TriggerSpec.parse("real-time:5s")
    monkeypatch.setattr(spark_line, "version", lambda: "4.2.1")
    refused = violations(WINDOWED, "update", SQLITE, rt, "kafka")
    assert [v.code for v in refused] == ["REAL_TIME_STATE_UNSUPPORTED"]
    assert "4.3" in refused[0].render() and "4.2.1" in refused[0].render()
    dedup = replace(STATELESS, dedup=True)
    assert codes(dedup, "update", SinkSpec("kafka"), rt, "kafka") == ["REAL_TIME_STATE_UNSUPPORTED"]
    assert codes(STATELESS, "update", SinkSpec("console"), rt, "kafka") == []
    assert codes(WINDOWED, "update", SQLITE) == []  # a micro-batch trigger: no operator limit
    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    assert codes(WINDOWED, "update", SQLITE, rt, "kafka") == []


def test_real_time_state_follows_the_installed_line() -> None:
    """No version stubbed: on the line this environment runs (4.3 in the main suite, 4.2 in
    `make test-delta`), an aggregating real-time output is refused exactly below 4.3."""
    import pyspark

    rt = TriggerSpec.parse("real-time:5s")
    older = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 3)
    refused = ["REAL_TIME_STATE_UNSUPPORTED"] if older else []
    assert codes(WINDOWED, "update", SQLITE, rt, "kafka") == refused
