"""The record generators that share generators/streams.py (sensors, iot, temperature_load):
same seed same bytes, exact counts, the arrival model, and the `generate` command. No Spark."""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from slipstream.app.cli import main
from slipstream.errors import ConfigError
from slipstream.tools.generators import activity, ads, iot, mobile, sensors, temperature_load
from slipstream.tools.generators.streams import StreamSpec, generate

DIRTY = StreamSpec(
    duration=timedelta(minutes=30), seed=4, out_of_order=0.1, late=0.05, duplicates=0.05,
    malformed=0.05,
)  # fmt: skip


def _lines(folder: Path) -> list[str]:
    return [line for p in sorted(folder.glob("*.jsonl")) for line in p.read_text().splitlines()]


@pytest.mark.parametrize(
    "make",
    [lambda: sensors.Sensors(), lambda: iot.Devices(rate=2.0), lambda: mobile.Phones(rate=2.0)],
    ids=["sensors", "iot", "mobile"],
)
def test_same_seed_same_bytes_and_the_counts_are_exact(make, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = generate(DIRTY, make(), tmp_path / "a")
    b = generate(DIRTY, make(), tmp_path / "b")
    assert _lines(tmp_path / "a") == _lines(tmp_path / "b")
    (counts,) = a.streams.values()
    lines = _lines(tmp_path / "a")
    assert len(lines) == counts.lines == counts.valid_unique + counts.duplicates + counts.malformed
    assert min(counts.late, counts.out_of_order, counts.duplicates, counts.malformed) > 0
    assert sum(counts.malformed_kinds.values()) == counts.malformed
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            continue
    assert len(lines) - len(parsed) == counts.malformed_kinds.get("not_json", 0)
    assert b.to_dict() == a.to_dict()


def test_lines_arrive_in_order_except_the_out_of_order_and_late_ones(tmp_path: Path) -> None:
    spec = StreamSpec(duration=timedelta(minutes=30), seed=2, out_of_order=0.1, late=0.05,
                      duplicates=0.0, malformed=0.0)  # fmt: skip
    report = generate(spec, sensors.Sensors(), tmp_path)
    times = [datetime.fromisoformat(json.loads(x)["event_time"][:-1]) for x in _lines(tmp_path)]
    newest, behind, late = times[0], 0, 0
    for moment in times:
        if moment < newest:
            behind += 1
            late += newest - moment > spec.watermark  # more than a watermark behind: late
        newest = max(newest, moment)
    counts = report.streams["readings"]
    assert late == counts.late > 0
    assert behind <= counts.out_of_order + counts.late


def test_a_file_per_stream_and_span_in_two_folders(tmp_path: Path) -> None:
    report = generate(temperature_load.DEFAULTS, temperature_load.Locations(3), tmp_path)
    for stream, time in (("temperature", "temp_taken_time"), ("load", "load_taken_time")):
        lines = _lines(tmp_path / stream)
        assert len(lines) == report.streams[stream].lines > 0
        first = json.loads(next(x for x in lines if x.startswith("{") and x.endswith("}")))
        assert time in first and first["location_id"].startswith("loc")


def test_iot_records_have_the_seed_fields_in_order_and_its_timestamp_form(
    tmp_path: Path,
) -> None:
    generate(StreamSpec(duration=timedelta(minutes=1), malformed=0.0), iot.Devices(), tmp_path)
    record = json.loads(_lines(tmp_path)[0])
    assert list(record) == ["id", "user_id", "device_id", "num_steps", "miles_walked",
                            "calories_burnt", "timestamp", "value"]  # fmt: skip
    assert record["timestamp"].endswith("+0000") and len(record["timestamp"]) == 28
    assert json.loads(record["value"])["num_steps"] == record["num_steps"]
    assert record["miles_walked"] == round(record["num_steps"] / 2000, 4)


def test_generate_commands_write_report_and_refuse_bad_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "sensors", "--out", str(tmp_path / "s"), "--duration", "5m",
                 "--noisy", "1", "--quiet"]) == 0  # fmt: skip
    report = json.loads((tmp_path / "s_generation-report.json").read_text())
    assert len(report["info"]["noisy"]) == 1 and report["workload"] == "sensors"
    assert main(["generate", "iot", "--out", str(tmp_path / "i"), "--duration", "2m",
                 "--quiet"]) == 0  # fmt: skip
    assert list((tmp_path / "i").glob("device-*.jsonl"))
    assert main(["generate", "temperature_load", "--out", str(tmp_path / "t"), "--duration",
                 "1h", "--quiet"]) == 0  # fmt: skip
    assert list((tmp_path / "t" / "load").glob("load-*.jsonl"))
    capsys.readouterr()
    assert main(["generate", "sensors", "--out", str(tmp_path / "x"), "--late", "2"]) == 2
    assert "--late must be a share between 0 and 1" in capsys.readouterr().err
    assert main(["generate", "sensors", "--out", str(tmp_path / "s"), "--quiet"]) == 2
    assert "already holds" in capsys.readouterr().err  # Spark never re-reads a file name
    with pytest.raises(ConfigError, match="--noisy"):
        sensors.Sensors(3, 2, 2, 0)


def _records(folder: Path) -> list[dict]:
    out = []
    for line in _lines(folder):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        out.append(record)
    return out


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_ads_clicks_follow_their_impressions_and_arrive_within_the_seeds_delays(
    tmp_path: Path,
) -> None:
    spec = replace(ads.DEFAULTS, duration=timedelta(hours=5), malformed=0.0, duplicates=0.0)
    workload = ads.Ads(rate=1.0, seed=3)
    report = generate(spec, workload, tmp_path)
    catalog = workload.write_catalog(tmp_path / "catalog.csv")
    known_ads = {row["ad_id"] for row in ads.read_catalog(catalog)}
    impressions = {r["impression_id"]: r for r in _records(tmp_path / "impressions")}
    clicks = _records(tmp_path / "clicks")
    assert len(clicks) == report.info["clicks_within_hour"] + report.info["clicks_after_hour"]
    delays = []
    for click in clicks:
        shown = impressions[click["impression_id"]]
        assert (click["ad_id"], click["user_id"]) == (shown["ad_id"], shown["user_id"])
        assert click["ad_id"] in known_ads
        delays.append(_at(click["click_time"]) - _at(shown["impression_time"]))
    hour = timedelta(hours=1)
    assert sum(d <= hour for d in delays) == report.info["clicks_within_hour"] > 0
    assert sum(d > hour for d in delays) == report.info["clicks_after_hour"] > 0
    assert all(timedelta(0) <= d < 2 * hour for d in delays)
    # transit: a record lands in the file of its arrival, at most 2h (impressions) or 3h
    # (clicks) after its event time
    start = spec.start
    for stream, time, most in (("impressions", "impression_time", 2), ("clicks", "click_time", 3)):
        for path in sorted((tmp_path / stream).glob("*.jsonl")):
            index = int(path.stem.rsplit("-", 1)[1])
            arrived_by = start + (index + 1) * spec.file_every
            for record in map(json.loads, path.read_text().splitlines()):
                assert arrived_by - _at(record[time]) <= timedelta(hours=most) + spec.file_every


def test_activity_sessions_open_and_close_and_the_bursty_users_burst(tmp_path: Path) -> None:
    spec = replace(activity.DEFAULTS, duration=timedelta(hours=2), out_of_order=0.0, late=0.0,
                   duplicates=0.0, malformed=0.0)  # fmt: skip
    report = generate(spec, activity.Users(50, 2, seed=5), tmp_path)
    by_user: dict[str, list[tuple[datetime, str]]] = {}
    for record in _records(tmp_path):
        by_user.setdefault(record["user_id"], []).append((_at(record["ts"]), record["action"]))
    per_minute: dict[str, int] = {}
    for user, actions in by_user.items():
        actions.sort()
        open_session = False
        for _, action in actions:
            assert (action == "open") != open_session, (user, action)  # open only when closed
            open_session = action not in ("close", "crash")
        minutes: dict[datetime, int] = {}
        for moment, _ in actions:
            key = moment.replace(second=0, microsecond=0)
            minutes[key] = minutes.get(key, 0) + 1
        per_minute[user] = max(minutes.values())
    bursty = set(report.info["bursty"])
    assert {u for u, n in per_minute.items() if n > 30} == bursty
    assert report.info["crashes"] == sum(a == "crash" for x in by_user.values() for _, a in x)


def test_generate_ads_and_activity_before_their_pipelines_exist(tmp_path: Path) -> None:
    assert main(["generate", "ads", "--out", str(tmp_path / "a" / "in"), "--duration", "30m",
                 "--quiet"]) == 0  # fmt: skip
    assert (tmp_path / "a" / "catalog.csv").read_text().startswith("ad_id,campaign,cost_per_click")
    assert list((tmp_path / "a" / "in" / "clicks").glob("clicks-*.jsonl"))
    assert main(["generate", "activity", "--out", str(tmp_path / "u"), "--duration", "10m",
                 "--quiet"]) == 0  # fmt: skip
    assert list((tmp_path / "u").glob("actions-*.jsonl"))


def test_the_progress_bar_counts_every_line_written_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Tty()
    monkeypatch.setattr(sys, "stderr", terminal)
    spec = StreamSpec(duration=timedelta(minutes=5))
    report = generate(spec, temperature_load.Locations(3), tmp_path / "bar", progress=True)
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue().rstrip("\n").splitlines()[-1])
    written = sum(len(_lines(tmp_path / "bar" / s)) for s in ("temperature", "load"))
    assert last.startswith(f"temperature_load: {written:,} in ") and written == report.total_lines
    generate(spec, temperature_load.Locations(3), tmp_path / "quiet", progress=False)
    assert terminal.getvalue().count("temperature_load: ") == 1  # --quiet: no bar


def test_generate_mobile_writes_the_seeds_actions_at_its_rate_into_files_or_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "mobile", "--out", str(tmp_path / "m"), "--duration", "10m",
                 "--rate", "4", "--devices", "7", "--malformed", "0", "--quiet"]) == 0  # fmt: skip
    records = _records(tmp_path / "m")
    assert {r["action"] for r in records} == {"open", "swipe", "close", "crash"}
    assert {r["id"] for r in records} == {f"phone{n}" for n in range(1, 8)}
    valid = json.loads((tmp_path / "m_generation-report.json").read_text())
    assert valid["streams"]["actions"]["valid_unique"] == pytest.approx(4 * 600, rel=0.1)
    sent: list[tuple[str, list[str]]] = []
    spec = replace(mobile.DEFAULTS, duration=timedelta(minutes=10))
    report = generate(
        spec, mobile.Phones(), tmp_path / "unused", write=lambda n, x: sent.append((n, x))
    )
    generate(spec, mobile.Phones(), tmp_path / "files")
    assert not (tmp_path / "unused").exists()  # a topic's writer: no folder made
    files = sorted((tmp_path / "files").glob("actions-*.jsonl"))
    assert [x for _, x in sent] == [p.read_text().splitlines() for p in files]
    assert sum(len(x) for _, x in sent) == report.total_lines
    capsys.readouterr()
    assert main(["generate", "ads", "--to", "kafka://127.0.0.1:9/ads", "--quiet"]) == 2
    assert "--to writes one topic" in capsys.readouterr().err  # two streams, one topic


def test_generate_wordcount_writes_the_same_lines_for_a_seed_and_refuses_a_used_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b"):
        assert main(["generate", "wordcount", "--out", str(tmp_path / name), "--lines", "120",
                     "--lines-per-file", "50"]) == 0  # fmt: skip
    a, b = (sorted((tmp_path / n).glob("lines-*.txt")) for n in ("a", "b"))
    assert [p.name for p in a] == ["lines-00000000.txt", "lines-00000001.txt", "lines-00000002.txt"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    lines = [line for p in a for line in p.read_text().splitlines()]
    words = sum(len(line.split()) for line in lines)
    assert len(lines) == 120 and f"wrote 120 lines ({words:,} words)" in capsys.readouterr().out
    assert any(not line.strip() for line in lines) and any("\t" in line for line in lines)
    assert main(["generate", "wordcount", "--out", str(tmp_path / "a")]) == 2
    assert "already holds 3 lines files" in capsys.readouterr().err
