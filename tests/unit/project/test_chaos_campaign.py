"""The fault campaign's own logic, without Spark (tests/chaos/; its scenarios run in
tests/e2e/crash/test_chaos.py and `make chaos`): a plan is a pure function of its seed, the
damage it does to a checkpoint file, the committed files of a Spark file sink, the summary it
reconciles."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.chaos.execute import NOISE, SUMMARY, cut
from tests.chaos.input_faults import UNREACHABLE, appended_lines
from tests.chaos.outputs import committed_files
from tests.chaos.runner import REFUSED, RUN_TAG, Runner, alive_with
from tests.chaos.scenario import BROKER_HOW, FAULTS, INPUT_FAULTS, LATE_AFTER, NEED_HISTORY, plan
from tests.chaos.workloads import WORKLOADS


def test_a_plan_is_a_pure_function_of_its_seed() -> None:
    plans = [plan(seed) for seed in range(1, 301)]
    assert plans == [plan(seed) for seed in range(1, 301)]
    assert len({p.describe().split(":", 1)[1] for p in plans}) > 250
    drawn = {f.kind for p in plans for f in p.faults}
    assert drawn == set(FAULTS) | set(INPUT_FAULTS)
    for p in plans:
        first = [f for f in p.faults if f.kind not in INPUT_FAULTS]  # the first stream's
        assert 1 <= len(first) <= 3 and first[0].kind not in NEED_HISTORY
        assert len(p.faults) - len(first) <= 1
        assert sum(f.land for f in p.faults) < p.files  # files are left for the final run
        assert p.sink != "parquet" or p.pipeline == "mobile"
        assert not any(f.kind == "window" for f in p.faults) or p.pipeline == "mobile"


def test_the_input_faults_fit_their_input() -> None:
    """A broker restart comes with (and only with) a Kafka input; an appended file or a late
    one with files; a late file with mobile (the pipeline with a watermark), with at least
    LATE_AFTER files landing after it."""
    plans = [plan(seed) for seed in range(1, 401)]
    kafka = [p for p in plans if p.input == "kafka"]
    assert 0.15 < len(kafka) / len(plans) < 0.4
    assert {p.pipeline for p in kafka} == {"mobile", "wordcount"}
    for p in plans:
        kinds = [f.kind for f in p.faults]
        assert (p.input == "kafka") == ("broker" in kinds)
        assert "append" not in kinds or p.input == "files"
        assert "late-file" not in kinds or p.pipeline == "mobile"
        if "late-file" in kinds:
            at = kinds.index("late-file")
            assert p.files - sum(f.land for f in p.faults[: at + 1]) > LATE_AFTER
    hows = {f.how for p in kafka for f in p.faults if f.kind == "broker"}
    assert hows == set(BROKER_HOW)
    for p in kafka:
        (broker,) = (f for f in p.faults if f.kind == "broker")
        assert (broker.delay_s > 0) == (broker.how == "during") and broker.delay_s <= 5
    assert any("late-file" in (f.kind for f in p.faults) for p in plans)


def test_the_second_stream_leaves_the_first_streams_plans_alone() -> None:
    """A seed's first stream draws what it drew before the input faults existed: the suite's
    fixed seed keeps its plan word for word, and about half the seeds draw nothing more."""
    fixed = plan(1271)
    assert fixed.input == "files"
    assert fixed.describe() == (
        "seed 1271: mobile into sqlite, 8 files; kill-random 1.15s into a batch (after 1 more "
        "files); damage sources empty (after 1 more files); window 40s instead of 20s (after 1 "
        "more files)"
    )
    unchanged = [
        s for s in range(1, 201) if not set(INPUT_FAULTS) & {f.kind for f in plan(s).faults}
    ]
    assert len(unchanged) > 80


def test_appended_lines_are_records_that_would_count() -> None:
    """The appended mobile lines are valid actions at the newest event time (never late, so a
    wrong read shows in the table); the model counts each of them when they are given to it."""
    batch = ['{"id":"p1","action":"open","ts":"2026-01-01T00:00:01Z"}', "not json",
             '{"id":"p2","action":"swipe","ts":"2026-01-01T00:00:19Z"}']  # fmt: skip
    lines = appended_lines("mobile", [batch])
    assert all(json.loads(x)["ts"] == "2026-01-01T00:00:19Z" for x in lines)
    before = WORKLOADS["mobile"].model([batch])
    after = WORKLOADS["mobile"].model([batch + lines])
    assert sum(after.table.values()) == sum(before.table.values()) + len(lines)
    words = WORKLOADS["wordcount"].model([appended_lines("wordcount", [])])
    assert words.lines == len(appended_lines("wordcount", [])) and words.table


def test_the_damage_empties_cuts_or_garbles_a_file(tmp_path: Path) -> None:
    log = tmp_path / "3"
    body = "v1\n" + json.dumps({"path": "file:///landing/a.json", "batchId": 3}) + "\n"
    for how, check in (
        ("empty", lambda text: text == ""),
        ("header-only", lambda text: text == "v1\n"),
        ("garbled", lambda text: "#garbled#" in text and len(text) >= len(body)),
    ):
        log.write_text(body)
        cut(log, how)
        assert check(log.read_text()), how


def test_a_file_sinks_committed_files_are_its_logs_adds(tmp_path: Path) -> None:
    meta = tmp_path / "_spark_metadata"
    meta.mkdir()

    def entry(name: str, action: str = "add") -> str:
        return json.dumps({"path": f"file://{tmp_path}/{name}", "action": action})

    (meta / "0").write_text("v1\n" + entry("a.parquet") + "\n")
    (meta / "1").write_text("v1\n" + entry("b.parquet") + "\n")
    (meta / "2.compact").write_text("v1\n" + entry("a.parquet") + "\n" + entry("c.parquet") + "\n")
    (meta / "3").write_text("v1\n" + entry("d.parquet") + "\n" + entry("c.parquet", "delete"))
    (meta / ".3.crc").write_text("x")
    names = sorted(p.name for p in committed_files(tmp_path))
    assert names == ["a.parquet", "d.parquet"]  # from the compaction on; b was compacted away
    assert committed_files(tmp_path / "nothing") == []


def test_the_summary_refusals_and_noise_are_read_from_a_runs_text() -> None:
    text = (
        "summary mobile.counts: 5 batches, 1,212 records read = 1,190 valid + 12 quarantined"
        " + 10 late (dropped by the watermark)\n"
        "slipstream: refused [CHECKPOINT_DAMAGED] the checkpoint of mobile.counts is damaged\n"
    )
    found = SUMMARY.search(text)
    assert found and found.groups() == ("mobile.counts", "1,212", "1,190", "12", "10", None)
    dup = SUMMARY.search("summary x.y: 1 batch, 9 records read = 6 valid + 1 quarantined + 0 "
                         "late (dropped by the watermark) + 2 duplicates dropped")  # fmt: skip
    assert dup and dup.group(6) == "2"
    assert (m := REFUSED.search(text)) and m.group(1) == "CHECKPOINT_DAMAGED"
    stopped = "slipstream: the query failed [KAFKA_UNREACHABLE] the broker 127.0.0.1:9 ..."
    assert UNREACHABLE.search("x\n" + stopped) and not UNREACHABLE.search(text)
    assert not NOISE.search(text)
    for noise in ("Traceback (most recent", "26/11/29 07:01:02 WARN Shell: x",
                  "ERROR Inbox: Ignoring error", "[Stage 2:>      (0 + 1) / 1]"):  # fmt: skip
        assert NOISE.search("ok\n" + noise), noise


def test_a_late_file_lands_after_its_successors_and_the_model_reads_it_there(
    tmp_path: Path,
) -> None:
    """The runner's landing, without Spark: a file held back lands once LATE_AFTER files
    landed after it (modification times in landing order: Spark's order), the model counts
    an appended file as its batch read it, and after `reset --outputs` as it is now."""
    from tests.chaos.runner import Runner, Sink
    from tests.chaos.scenario import LATE_AFTER, Scenario

    runner = Runner(Scenario(9, "mobile", "sqlite", 8, 5), tmp_path, Sink([], dict, False))
    staged = list(runner.pending)
    runner.land(1)
    runner.held, runner.hold_for = runner.pending.pop(0), LATE_AFTER
    runner.land(LATE_AFTER - 1)
    assert [p.name for p in runner.landed] == [p.name for p in staged[:1] + staged[2:5]]
    runner.land(1)
    order = [staged[0], *staged[2:6], staged[1]]
    assert [p.name for p in runner.landed] == [p.name for p in order]
    by_mtime = sorted(runner.landed, key=lambda p: p.stat().st_mtime)
    assert by_mtime == runner.landed
    assert runner.batches() == [p.read_text().splitlines() for p in order]

    first = runner.landed[0]
    runner.append_to(first, ["appended"])
    assert runner.batches()[0] == staged[0].read_text().splitlines()  # as read
    runner.read_again()
    assert runner.batches()[-1][-1] == "appended"  # whole, at its new modification time
    runner.land_rest()
    assert sorted(p.name for p in runner.landed) == sorted(p.name for p in staged)


def test_the_third_stream_draws_the_kafka_sink_and_the_full_disk_for_some_seeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sink and the disk come from a third stream (`random.Random(f"{seed}:output")`):
    deterministic, about one seed in five each (and a Delta table for one in six of the others,
    with the first streams' faults as drawn), and a seed that draws none keeps its plan
    of the two first streams word for word. A Kafka sink has no transaction: no kill inside one
    or after its commit is drawn for it (those become random kills with a drawn delay)."""
    from dataclasses import replace

    from tests.chaos import scenario
    from tests.chaos.scenario import DISK_FULL_KIB, KILLS

    plans = [plan(seed) for seed in range(1, 401)]
    with monkeypatch.context() as patch:
        patch.setattr(scenario, "output", lambda s: s)  # the two first streams' plans
        before = [plan(seed) for seed in range(1, 401)]
    assert plans == [plan(seed) for seed in range(1, 401)]
    kafka = [p for p in plans if p.sink == "kafka"]
    full = [p for p in plans if p.disk_full_kib]
    assert 0.1 < len(kafka) / len(plans) < 0.3 and 0.1 < len(full) / len(plans) < 0.3
    assert {p.pipeline for p in kafka} == {"mobile", "wordcount"}
    assert {p.input for p in kafka} == {"files", "kafka"}
    assert {p.sink for p in full} >= {"sqlite", "postgresql", "kafka"}
    assert all(DISK_FULL_KIB[0] <= p.disk_full_kib <= DISK_FULL_KIB[1] for p in full)
    assert plan(1271).sink == "sqlite" and not plan(1271).disk_full_kib  # the suite's seed
    delta = [p for p in plans if p.sink == "delta"]
    assert 0.08 < len(delta) / len(plans) < 0.25  # one in six of the seeds not into Kafka
    assert {p.pipeline for p in delta} == {"mobile", "wordcount"}
    assert {p.input for p in delta} == {"files", "kafka"}
    for p, was in zip(plans, before, strict=True):
        assert ("disk-full" in p.describe()) == bool(p.disk_full_kib)
        if p.sink == "delta":  # the first streams' plan and faults, into a Delta table
            assert replace(p, sink=was.sink, disk_full_kib=0) == was
            continue
        if p.sink != "kafka":  # the third stream drew no sink: the plan of before, its disk aside
            assert replace(p, disk_full_kib=0) == was
            continue
        assert not {f.kind for f in p.faults} & set(KILLS[1:])
        assert len(p.faults) == len(was.faults) and replace(p, sink=was.sink, faults=()) == (
            replace(was, faults=(), disk_full_kib=p.disk_full_kib)
        )
        for f, g in zip(p.faults, was.faults, strict=True):
            assert f == g or (g.kind in KILLS[1:] and f.kind == "kill-random" and f.land == g.land)
    assert sum(p == was for p, was in zip(plans, before, strict=True)) > 170


def test_a_kafka_topic_is_read_as_the_latest_value_of_each_key() -> None:
    """What a consumer that upserts by key sees of an at-least-once topic: a key written twice
    (a batch replayed) or updated later counts once, with its latest value."""
    from tests.chaos.outputs import latest_by_key

    def record(offset: int, word: str, count: int) -> dict[str, object]:
        key = json.dumps({"word": word})
        return {"partition": 0, "offset": offset, "key": key,
                "value": json.dumps({"word": word, "count": count})}  # fmt: skip

    records = [record(0, "a", 1), record(1, "b", 2), record(2, "a", 3), record(3, "a", 3)]
    frame = latest_by_key(list(reversed(records)))  # the offsets order them, not the list
    assert WORKLOADS["wordcount"].rows(frame) == {("a",): 3, ("b",): 2}
    assert frame.attrs["records"] == 4
    assert WORKLOADS["wordcount"].rows(latest_by_key([])) == {}
    start, end = "2026-01-01T00:00:20.000Z", "2026-01-01T00:00:40.000Z"
    key = {"window_start": start, "action": "open"}
    value = {**key, "window_end": end, "count": 4}
    mobile = latest_by_key(
        [{"partition": 0, "offset": 0, "key": json.dumps(key), "value": json.dumps(value)}]
    )
    assert WORKLOADS["mobile"].rows(mobile) == {("2026-01-01T00:00:20Z", "open"): 4}


def test_the_checkpoint_is_read_once_what_a_killed_run_left_is_gone(tmp_path: Path) -> None:
    """A SIGKILLed driver's JVM goes on for a moment and may still write the checkpoint (seed
    386: it planned the next batch after the kill, and the next fault took that for its own
    run's progress). Here a 'driver' leaves a 'JVM' behind that writes an offsets file half a
    second after the driver is killed: the runner reads the checkpoint after it."""
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    target = str(offsets / "2")
    jvm = f"import pathlib, time; time.sleep(0.5); pathlib.Path({target!r}).write_text('v1')"
    driver_code = (
        f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {jvm!r}]); "
        "print('started', flush=True); import time; time.sleep(600)"
    )
    tag = str(tmp_path / "run-01-run.log")
    driver = subprocess.Popen(
        [sys.executable, "-c", driver_code], env={**os.environ, RUN_TAG: tag},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert driver.stdout is not None and driver.stdout.readline().strip() == "started"
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert alive_with(tag) and not (offsets / "2").exists()  # the 'JVM' is still going
    runner = SimpleNamespace(running=[(tag, driver)])
    Runner.settle(runner)  # type: ignore[arg-type]
    assert (offsets / "2").exists() and not alive_with(tag)
    assert runner.running == []
