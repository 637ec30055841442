"""What `generate` says about the events it made late, and where its report goes (issue 30,
items 7 and 9), without Spark."""

from __future__ import annotations

import io
import json
from pathlib import Path

from slipstream.app.cli import main


def test_generate_says_how_many_events_it_made_late_and_keeps_its_report_out_of_the_stream(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    views = tmp_path / "landing" / "views"
    argv = ["generate", "trending", "--out", str(views), "--events", "3000", "--rate", "20"]
    assert main([*argv, "--file-every", "10s", "--watermark", "1m", "--window", "1m",
                 "--quiet"], out=out) == 0  # fmt: skip
    assert {p.name for p in views.iterdir()} == {p.name for p in views.glob("views-*.jsonl")}
    report = json.loads((tmp_path / "landing" / "views_generation-report.json").read_text())
    said = out.getvalue()
    assert report["late"] > 0
    assert f"late: {report['late']:,} events made late" in said
    assert "--watermark + --window (1m + 1m)" in said and "--max-files-per-trigger 1" in said
    assert f"at most {report['late']:,}" in said

    sensors = tmp_path / "sensors"
    assert main(["generate", "sensors", "--out", str(sensors), "--duration", "5m", "--quiet"],
                out=io.StringIO()) == 0  # fmt: skip
    assert not list(sensors.rglob("*report*"))
    assert (tmp_path / "sensors_generation-report.json").is_file()
