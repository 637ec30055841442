"""The fault campaign's own logic, without Spark (tests/chaos/; its scenarios run in
tests/e2e/crash/test_chaos.py and `make chaos`): a plan is a pure function of its seed, the
damage it does to a checkpoint file, the committed files of a Spark file sink, the summary it
reconciles."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.execute import NOISE, REFUSED, SUMMARY, cut
from tests.chaos.outputs import committed_files
from tests.chaos.scenario import FAULTS, NEED_HISTORY, plan


def test_a_plan_is_a_pure_function_of_its_seed() -> None:
    plans = [plan(seed) for seed in range(1, 301)]
    assert plans == [plan(seed) for seed in range(1, 301)]
    assert len({p.describe().split(":", 1)[1] for p in plans}) > 250
    drawn = {f.kind for p in plans for f in p.faults}
    assert drawn == set(FAULTS)
    for p in plans:
        assert 1 <= len(p.faults) <= 3 and p.faults[0].kind not in NEED_HISTORY
        assert sum(f.land for f in p.faults) < p.files  # files are left for the final run
        assert p.sink != "parquet" or p.pipeline == "mobile"
        assert not any(f.kind == "window" for f in p.faults) or p.pipeline == "mobile"


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
    assert not NOISE.search(text)
    for noise in ("Traceback (most recent", "26/11/29 07:01:02 WARN Shell: x",
                  "ERROR Inbox: Ignoring error", "[Stage 2:>      (0 + 1) / 1]"):  # fmt: skip
        assert NOISE.search("ok\n" + noise), noise
