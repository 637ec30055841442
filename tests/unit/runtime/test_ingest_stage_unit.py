"""The ingest stage's rules without Spark: which quarantine files the readers take as committed
(`committed_files`), and when `auto` stages a run (`decide`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slipstream.sinks.spark_sinks import committed_files


def test_a_quarantine_the_ingest_stage_wrote_is_read_file_by_file_in_batch_order(
    tmp_path: Path,
) -> None:
    for name in ("batch-10.json", "batch-2.json", ".batch-3.json.tmp", "batch-x.json"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / ".tmp-batch-4-abc").mkdir()  # a write a crash interrupted: hidden, never read
    assert committed_files(tmp_path) == [tmp_path / "batch-2.json", tmp_path / "batch-10.json"]
    assert committed_files(tmp_path / "missing") == []


def test_auto_stages_a_new_run_only_for_a_delta_quarantine_and_keeps_a_checkpoints_kind(
    tmp_path: Path,
) -> None:
    from slipstream.core.specs import DeltaFolder
    from slipstream.runtime import runner
    from slipstream.runtime.ingest_stage import MARK, decide
    from slipstream.settings.config import load_settings

    def staged(pipeline: str, **flags: Any) -> bool | None:
        settings = load_settings(pipeline, {"state_dir": tmp_path / "state", **flags}, environ={})
        return runner.prepare(settings, check_source=False).settings.ingest_stage

    # sensors and ads: three outputs read each input; mobile: one
    assert staged("sensors", trigger="available-now") is False
    assert staged("ads", trigger="once") is False
    assert staged("mobile", trigger="available-now") is False
    assert staged("sensors") is False  # a live trigger
    # a Delta quarantine is written by the ingest query (the 4.2 line's tests run it end to
    # end; here its settings are made without that line's check)
    mobile = load_settings("mobile", {"state_dir": tmp_path / "state"}, environ={})
    delta = mobile.with_(quarantine=DeltaFolder(tmp_path / "rejected"))
    assert decide(delta, runner.prepare(mobile, check_source=False).outputs) is True
    assert staged("sensors", trigger="available-now", ingest_stage="true") is True
    assert staged("mobile", ingest_stage="true") is True
    # a checkpoint that planned a batch goes on as it was made, whatever the trigger
    checkpoint = tmp_path / "state" / "checkpoints" / "sensors" / "sensor_stats"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1")
    assert staged("sensors", trigger="available-now") is False  # made without the stage
    (checkpoint / MARK).write_text("")
    assert staged("sensors") is True  # made with it: a live run goes on with it
    assert staged("sensors", ingest_stage="false") is False  # as given (then refused at start)


def test_an_output_of_bronze_accounts_for_every_line_its_ingest_query_read() -> None:
    """The summary's `records read = valid + quarantined + late + duplicates` for an output that
    reads bronze: what its ingest query quarantined, and the lines that were no record (blank
    lines, a CSV header), are added back, as the output counted them without the stage."""
    from slipstream.monitor.accounts import with_ingest

    def totals(rows: int, quarantined: int, checked: int) -> dict[str, Any]:
        return {"rows": rows, "quarantined": quarantined, "checked": checked, "expectations": {}}

    output = totals(rows=38, quarantined=0, checked=0)  # the valid rows it read from bronze
    ingest = totals(rows=52, quarantined=8, checked=46)  # 6 blank lines, 8 rejected, 38 valid
    merged = with_ingest(output, [ingest])
    assert (merged["rows"], merged["quarantined"]) == (52, 8)
    assert with_ingest(output, []) is output
