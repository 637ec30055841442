"""The trending event generator, its atomic writer and the progress bar. Pure Python, no Spark.

Counts are checked against an independent re-parse of the written files (``_reparse``), which
knows nothing about how the generator decided what to write.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import signal
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from slipstream.core.files import write_atomically
from slipstream.monitor.progressbar import ProgressBar
from slipstream.tools.generators.trending import (
    SECTIONS,
    GenerationReport,
    SpecError,
    TrendingSpec,
    catalog,
    generate,
    write_catalog,
)

# Every kind of dirt a trending stream can carry, turned off.
NO_DIRT = dict.fromkeys(("malformed", "duplicates", "late", "out_of_order", "unknown_article"), 0.0)

# A small, dirty workload: many files, every kind of line, watermark and window short enough
# that late events (older than watermark + window) appear within a few files.
DIRTY = TrendingSpec(
    articles=50,
    users=400,
    rate=400.0,
    events=24_000,
    seed=7,
    out_of_order=0.10,
    late=0.05,
    duplicates=0.05,
    malformed=0.05,
    unknown_article=0.02,
    watermark=timedelta(seconds=10),
    window=timedelta(seconds=5),
)
EVENT_FILE = re.compile(r"views-\d{8}\.jsonl")


class FakeClock:
    """Records every ``sleep_until`` and jumps there at once; optionally acts on the n-th call."""

    def __init__(
        self, out_dir: Path, start: float = 1000.0, on_call: dict[int, Any] | None = None
    ) -> None:
        self.t = start
        self.out_dir = out_dir
        self.sleeps: list[float] = []
        self.files_before_sleep: list[int] = []
        self.on_call = on_call or {}

    def now(self) -> float:
        return self.t

    def sleep_until(self, t: float) -> None:
        self.sleeps.append(t)
        self.files_before_sleep.append(len(_event_files(self.out_dir)))
        self.t = max(self.t, t)
        action = self.on_call.get(len(self.sleeps))
        if action is not None:
            action()


def _event_files(out_dir: Path) -> list[Path]:
    return sorted(p for p in out_dir.iterdir() if EVENT_FILE.fullmatch(p.name))


def _digest(out_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(out_dir.iterdir()):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _parse_ts(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _classify(line: str) -> tuple[str, dict[str, Any] | None]:
    """``valid`` or the malformed kind, decided from the line alone."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return "not_json", None
    if not isinstance(record, dict):
        return "not_json", None
    if "event_id" not in record:
        return "missing_event_id", None
    if "article_id" not in record:
        return "missing_article_id", None
    if not all(isinstance(record.get(k), str) for k in ("event_id", "article_id", "user_id")):
        return "wrong_type", None
    if not isinstance(record.get("ts"), str):
        return "bad_ts", None
    try:
        record["ts"] = _parse_ts(record["ts"])
    except ValueError:
        return "bad_ts", None
    return "valid", record


@dataclass
class Reparse:
    """What the files hold, counted line by line: `tally` has total_lines, files, valid_unique,
    duplicates, cross_file_duplicates, late, out_of_order and unknown_article."""

    tally: Counter[str] = field(default_factory=Counter)
    malformed_kinds: Counter[str] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    ts_texts: list[str] = field(default_factory=list)


def _reparse(out_dir: Path, spec: TrendingSpec, known_articles: set[str]) -> Reparse:
    """Classify every line independently of the generator's own bookkeeping.

    Relative to the running maximum ``M`` of valid ts, a unique valid event is in order
    (``ts >= M``), out of order (``M - watermark <= ts < M``) or late
    (``ts < M - watermark - window``, and also older than the maximum of all files before the
    previous one minus the same, since Spark filters late rows with the previous batch's
    watermark). Anything in between is a generator bug. Duplicates never re-send a late line.
    """
    result = Reparse()
    seen: dict[str, tuple[int, str]] = {}
    late_ids: set[str] = set()
    running_max: datetime | None = None
    previous_files_max: datetime | None = None
    for index, path in enumerate(_event_files(out_dir)):
        result.tally["files"] += 1
        older_files_max, previous_files_max = previous_files_max, running_max
        for line in path.read_text(encoding="utf-8").splitlines():
            result.tally["total_lines"] += 1
            kind, record = _classify(line)
            if record is None:
                result.malformed_kinds[kind] += 1
                continue
            event_id = record["event_id"]
            if event_id in seen:
                first_index, first_line = seen[event_id]
                assert line == first_line, "a duplicate must be an exact re-send"
                assert event_id not in late_ids, "a late line must not be re-sent"
                result.tally["duplicates"] += 1
                result.tally["cross_file_duplicates"] += first_index != index
                continue
            seen[event_id] = (index, line)
            result.tally["valid_unique"] += 1
            result.records.append(record)
            result.ts_texts.append(json.loads(line)["ts"])
            ts = record["ts"]
            if record["article_id"] not in known_articles:
                result.tally["unknown_article"] += 1
            if running_max is not None and ts < running_max:
                if ts >= running_max - spec.watermark:
                    result.tally["out_of_order"] += 1
                else:
                    assert ts < running_max - spec.watermark - spec.window, (
                        f"{event_id}: ts={ts} is neither within the watermark nor late"
                    )
                    assert older_files_max is not None
                    assert ts < older_files_max - spec.watermark - spec.window
                    late_ids.add(event_id)
                    result.tally["late"] += 1
            running_max = ts if running_max is None else max(running_max, ts)
            result.first = ts if result.first is None else min(result.first, ts)
            result.last = ts if result.last is None else max(result.last, ts)
    return result


def _known_articles(catalog_path: Path) -> set[str]:
    with catalog_path.open(encoding="utf-8", newline="") as handle:
        return {row["article_id"] for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def dirty_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GenerationReport, Reparse]:
    root = tmp_path_factory.mktemp("dirty")
    catalog_path = write_catalog(root / "catalog.csv", DIRTY)
    report = generate(DIRTY, root / "views")
    return root, report, _reparse(root / "views", DIRTY, _known_articles(catalog_path))


# --- write_atomically -------------------------------------------------------------------------


def test_write_atomically_writes_lines_and_returns_the_final_path(tmp_path: Path) -> None:
    path = write_atomically(tmp_path, "out.jsonl", iter(["a", "b"]))
    assert path == tmp_path / "out.jsonl"
    assert path.read_bytes() == b"a\nb\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_write_atomically_never_exposes_a_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace
    renames: list[tuple[Path, Path]] = []

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        src_path, dst_path = Path(src), Path(dst)
        assert not dst_path.exists(), "the final name must not exist before the rename"
        assert src_path.name.startswith((".", "_")), "Spark must ignore the temporary name"
        assert src_path.parent == dst_path.parent, "rename within one directory (atomic)"
        assert src_path.read_text() == "".join(f"{i}\n" for i in range(1000)), "complete"
        renames.append((src_path, dst_path))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_atomically(tmp_path, "views-00000000.jsonl", (str(i) for i in range(1000)))
    assert len(renames) == 1
    assert not renames[0][0].exists()
    assert [p.name for p in tmp_path.iterdir()] == ["views-00000000.jsonl"]


def test_write_atomically_leaves_nothing_behind_when_writing_fails(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("old\n")

    def failing() -> Iterator[str]:
        yield "first"
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        write_atomically(tmp_path, "new.txt", failing())
    with pytest.raises(RuntimeError, match="source broke"):
        write_atomically(tmp_path, "kept.txt", failing())
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
    assert (tmp_path / "kept.txt").read_text() == "old\n"


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_write_atomically_rejects_names_that_are_not_plain(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="name must be a plain file name"):
        write_atomically(tmp_path, name, ["x"])


# --- progress bar -----------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Ticker:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_progress_bar_is_silent_when_the_stream_is_not_a_tty() -> None:
    out = io.StringIO()
    with ProgressBar(10, "work", stream=out) as bar:
        bar.update(10)
    assert bar.done == 10
    assert out.getvalue() == ""


def test_progress_bar_draws_on_a_tty_and_ends_with_one_summary_line() -> None:
    out = _Tty()
    with ProgressBar(4, "work", stream=out, clock=_Ticker()) as bar:
        bar.update(1)
        bar.update(3)
    text = out.getvalue()
    assert "\x1b[" in text  # rich drew the bar in place on the terminal
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text.rstrip("\n").splitlines()[-1])
    assert last.startswith("work: 4/4 in ") and "/s)" in last  # bar cleared, one summary line
    assert text.endswith("\n")


def test_progress_bar_can_be_forced_and_handles_an_unknown_total() -> None:
    out = io.StringIO()  # not a terminal: no bar drawn, but the summary line when forced on
    with ProgressBar(None, "lines", stream=out, enabled=True, clock=_Ticker()) as bar:
        bar.update(1500)
    assert out.getvalue().startswith("lines: 1,500 in ") and out.getvalue().count("\n") == 1
    assert "\x1b[" not in out.getvalue()


def test_progress_bar_marks_an_interrupted_run_and_lets_the_error_through() -> None:
    out = io.StringIO()
    with (
        pytest.raises(KeyboardInterrupt),
        ProgressBar(10, "work", stream=out, enabled=True, clock=_Ticker()) as bar,
    ):
        bar.update(2)
        raise KeyboardInterrupt
    assert out.getvalue().startswith("work: 2/10 in ")
    assert out.getvalue().endswith(" - interrupted\n")


def test_progress_bar_rejects_negative_work() -> None:
    with pytest.raises(ValueError, match="n must be >= 0"):
        ProgressBar(1, "x", enabled=False).update(-1)
    with pytest.raises(ValueError, match="total must be >= 0"):
        ProgressBar(-1, "x")


# --- trending: determinism and atomicity --------------------------------------------------------


def test_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    spec = TrendingSpec(events=6_000, rate=1000.0)
    for run in ("one", "two"):
        generate(spec, tmp_path / run / "views")
        write_catalog(tmp_path / run / "catalog.csv", spec)
    assert _digest(tmp_path / "one" / "views") == _digest(tmp_path / "two" / "views")
    assert (tmp_path / "one" / "catalog.csv").read_bytes() == (
        tmp_path / "two" / "catalog.csv"
    ).read_bytes()


def test_a_different_seed_gives_different_files(tmp_path: Path) -> None:
    generate(TrendingSpec(events=3_000, seed=1), tmp_path / "a")
    generate(TrendingSpec(events=3_000, seed=2), tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "b")
    write_catalog(tmp_path / "a.csv", TrendingSpec(seed=1))
    write_catalog(tmp_path / "b.csv", TrendingSpec(seed=2))
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "b.csv").read_bytes()


def test_pacing_does_not_change_the_content(tmp_path: Path) -> None:
    spec = TrendingSpec(events=2_000, rate=500.0)
    generate(spec, tmp_path / "fast")
    generate(spec, tmp_path / "paced", clock=FakeClock(tmp_path / "paced"))
    assert _digest(tmp_path / "fast") == _digest(tmp_path / "paced")


def test_generate_leaves_only_final_event_files(
    dirty_run: tuple[Path, GenerationReport, Reparse],
) -> None:
    root, report, _ = dirty_run
    names = sorted(p.name for p in (root / "views").iterdir())
    assert len(names) == report.files == 60
    assert all(EVENT_FILE.fullmatch(name) for name in names), names[:5]
    assert names[0] == "views-00000000.jsonl" and names[-1] == "views-00000059.jsonl"


def test_generate_refuses_a_directory_that_already_holds_event_files(tmp_path: Path) -> None:
    generate(TrendingSpec(events=10), tmp_path)
    with pytest.raises(FileExistsError, match="already holds 1 event files"):
        generate(TrendingSpec(events=10), tmp_path)


# --- trending: the report is exact --------------------------------------------------------------


def test_report_counts_match_an_independent_reparse(
    dirty_run: tuple[Path, GenerationReport, Reparse],
) -> None:
    _, report, seen = dirty_run
    counted = ("total_lines", "files", "valid_unique", "duplicates", "late", "out_of_order")
    assert {k: getattr(report, k) for k in counted} == {k: seen.tally[k] for k in counted}
    assert report.unknown_article == seen.tally["unknown_article"]
    assert report.total_lines == DIRTY.events
    assert report.malformed == sum(seen.malformed_kinds.values())
    assert report.malformed_kinds == dict(seen.malformed_kinds)
    assert report.first_event_time == seen.first
    assert report.last_event_time == seen.last
    assert report.total_lines == report.valid_unique + report.duplicates + report.malformed
    assert not report.interrupted


def test_every_kind_of_dirt_is_present_in_roughly_the_asked_share(
    dirty_run: tuple[Path, GenerationReport, Reparse],
) -> None:
    _, report, seen = dirty_run
    lines = report.total_lines
    assert report.malformed / lines == pytest.approx(DIRTY.malformed, rel=0.15)
    assert report.duplicates / lines == pytest.approx(DIRTY.duplicates, rel=0.15)
    assert report.late / lines == pytest.approx(DIRTY.late, rel=0.15)
    assert report.out_of_order / lines == pytest.approx(DIRTY.out_of_order, rel=0.15)
    assert report.unknown_article / report.valid_unique == pytest.approx(
        DIRTY.unknown_article, rel=0.25
    )
    assert set(report.malformed_kinds) == {
        "not_json",
        "missing_event_id",
        "missing_article_id",
        "bad_ts",
        "wrong_type",
    }
    assert min(report.malformed_kinds.values()) > 0
    across = seen.tally["cross_file_duplicates"]
    assert across > 0, "some duplicates must land in a later file"
    assert across < seen.tally["duplicates"], "and some in the same file"


def test_report_at_default_fractions_matches_a_reparse(tmp_path: Path) -> None:
    spec = TrendingSpec(events=30_000, watermark=timedelta(seconds=5), window=timedelta(seconds=5))
    report = generate(spec, tmp_path / "views")
    seen = _reparse(tmp_path / "views", spec, {a.article_id for a in catalog(spec)})
    assert (report.valid_unique, report.duplicates, report.malformed) == (
        seen.tally["valid_unique"],
        seen.tally["duplicates"],
        sum(seen.malformed_kinds.values()),
    )
    assert (report.late, report.out_of_order, report.unknown_article) == (
        seen.tally["late"],
        seen.tally["out_of_order"],
        seen.tally["unknown_article"],
    )
    assert report.late > 0 and report.out_of_order > 0 and report.unknown_article > 0


def test_late_events_are_older_than_the_running_max_minus_watermark_and_window(
    dirty_run: tuple[Path, GenerationReport, Reparse],
) -> None:
    root, report, _ = dirty_run
    late: list[tuple[datetime, datetime]] = []
    running_max: datetime | None = None
    seen_ids: set[str] = set()
    for path in _event_files(root / "views"):
        for line in path.read_text().splitlines():
            kind, record = _classify(line)
            if record is None or record["event_id"] in seen_ids:
                continue
            seen_ids.add(record["event_id"])
            ts = record["ts"]
            if running_max is not None and ts < running_max - DIRTY.watermark:
                late.append((ts, running_max))
            running_max = ts if running_max is None else max(running_max, ts)
    assert len(late) == report.late > 0
    for ts, high in late:
        assert ts < high - DIRTY.watermark - DIRTY.window


def test_valid_ts_use_z_offsets_and_no_zone_for_the_same_timeline(
    dirty_run: tuple[Path, GenerationReport, Reparse],
) -> None:
    _, _, seen = dirty_run
    encodings = Counter(
        "z" if text.endswith("Z") else "offset" if re.search(r"[+-]\d\d:\d\d$", text) else "none"
        for text in seen.ts_texts
    )
    assert encodings["z"] > encodings["offset"] > encodings["none"] > 0
    # Offsets name the same instant: had they been misread, in-order events would turn into
    # "neither late nor within the watermark" and _reparse would have failed.
    millis = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}")
    assert all(millis.fullmatch(text[:23]) for text in seen.ts_texts)


# --- trending: traffic shape ------------------------------------------------------------------


def test_popularity_is_skewed_moves_over_time_and_readers_read_several(tmp_path: Path) -> None:
    spec = TrendingSpec(
        articles=200,
        rate=50.0,
        duration=timedelta(minutes=10),
        rotate_every=timedelta(minutes=1),
        file_every=timedelta(seconds=10),
        **NO_DIRT,  # the traffic's shape alone
    )
    generate(spec, tmp_path)
    seen = _reparse(tmp_path, spec, {a.article_id for a in catalog(spec)})
    assert seen.tally["valid_unique"] == 30_000
    by_minute: dict[int, Counter[str]] = {}
    for record in seen.records:
        minute = int((record["ts"] - spec.start) / timedelta(minutes=1))
        by_minute.setdefault(minute, Counter())[record["article_id"]] += 1
    first, last = by_minute[0], by_minute[9]
    top_tenth = sum(count for _, count in first.most_common(20))
    assert top_tenth / first.total() > 0.5, "a few articles get most views"
    assert {a for a, _ in first.most_common(3)} != {a for a, _ in last.most_common(3)}
    readers = Counter(record["user_id"] for record in seen.records)
    assert seen.tally["valid_unique"] / len(readers) > 3, "users read several articles"


# --- trending: bounds and pacing --------------------------------------------------------------


def test_a_fake_clock_paces_one_file_per_file_every(tmp_path: Path) -> None:
    spec = TrendingSpec(rate=100.0, file_every=timedelta(milliseconds=500), events=1_000)
    clock = FakeClock(tmp_path)
    report = generate(spec, tmp_path, clock=clock)
    files = _event_files(tmp_path)
    assert report.files == len(files) == 20
    assert [len(p.read_text().splitlines()) for p in files] == [50] * 20
    assert clock.sleeps == pytest.approx([1000.0 + 0.5 * (k + 1) for k in range(20)])
    assert all(a < b for a, b in zip(clock.sleeps, clock.sleeps[1:], strict=False))
    assert clock.files_before_sleep == list(range(20)), "file k appears after its time is due"


def test_a_fractional_rate_spreads_lines_evenly_over_files(tmp_path: Path) -> None:
    spec = TrendingSpec(rate=25.0, file_every=timedelta(milliseconds=100), events=100)
    generate(spec, tmp_path)
    sizes = [len(p.read_text().splitlines()) for p in _event_files(tmp_path)]
    assert sum(sizes) == 100 and set(sizes) == {2, 3}


def test_duration_bounds_the_run_and_the_first_bound_wins(tmp_path: Path) -> None:
    spec = TrendingSpec(rate=100.0, duration=timedelta(seconds=2.5))
    report = generate(spec, tmp_path / "duration")
    assert (report.total_lines, report.files) == (250, 3)
    assert report.last_event_time is not None
    assert report.last_event_time < spec.start + timedelta(seconds=2.5)
    both = TrendingSpec(rate=100.0, duration=timedelta(seconds=10), events=120)
    assert generate(both, tmp_path / "both").total_lines == 120


def test_keyboard_interrupt_from_the_clock_finishes_the_current_file(tmp_path: Path) -> None:
    spec = TrendingSpec(rate=100.0, file_every=timedelta(milliseconds=500))  # unbounded

    def interrupt() -> None:
        raise KeyboardInterrupt

    report = generate(spec, tmp_path, clock=FakeClock(tmp_path, on_call={3: interrupt}))
    assert report.interrupted
    assert report.files == 3 and report.total_lines == 150
    assert [len(p.read_text().splitlines()) for p in _event_files(tmp_path)] == [50, 50, 50]
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in _event_files(tmp_path)]


def test_sigint_stops_after_the_current_file_and_restores_the_handler(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    spec = TrendingSpec(rate=100.0, file_every=timedelta(milliseconds=500))  # unbounded
    clock = FakeClock(tmp_path, on_call={2: lambda: signal.raise_signal(signal.SIGINT)})
    report = generate(spec, tmp_path, clock=clock)
    assert report.interrupted and report.files == 2 and report.total_lines == 100
    assert signal.getsignal(signal.SIGINT) is before


# --- trending: report, catalog, validation --------------------------------------------------------


def test_report_is_json_serialisable_and_written_atomically(
    dirty_run: tuple[Path, GenerationReport, Reparse], tmp_path: Path
) -> None:
    _, report, _ = dirty_run
    path = report.write_report(tmp_path / "trending.report.json")
    loaded = json.loads(path.read_text())
    assert loaded == report.to_dict() == json.loads(json.dumps(report.to_dict()))
    assert loaded["first_event_time"].endswith("Z")
    assert loaded["spec"]["watermark_s"] == 10.0 and loaded["spec"]["seed"] == 7


def test_catalog_csv_has_the_documented_shape(tmp_path: Path) -> None:
    spec = TrendingSpec()
    path = write_catalog(tmp_path / "catalog.csv", spec)
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "article_id,title,section,published_at"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["article_id"] for row in rows] == [f"a{n:04d}" for n in range(1, 201)]
    assert {row["section"] for row in rows} <= set(SECTIONS)
    assert len({row["section"] for row in rows}) == len(SECTIONS)
    assert len({row["title"] for row in rows}) == 200 and all(row["title"] for row in rows)
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["published_at"])
        assert _parse_ts(row["published_at"]) < spec.start
    assert [p.name for p in tmp_path.iterdir()] == ["catalog.csv"]


def test_unknown_articles_are_not_in_the_catalog(
    dirty_run: tuple[Path, GenerationReport, Reparse],
) -> None:
    root, report, seen = dirty_run
    known = _known_articles(root / "catalog.csv")
    unknown = {r["article_id"] for r in seen.records if r["article_id"] not in known}
    assert unknown and all(re.fullmatch(r"a\d{4}", a) for a in unknown)
    assert report.unknown_article == seen.tally["unknown_article"]


@pytest.mark.parametrize(
    ("field_name", "changes"),
    [
        ("late", {"late": 1.5}),
        ("duplicates", {"duplicates": -0.1}),
        ("malformed", {"malformed": 1.0}),
        ("out_of_order", {"out_of_order": float("nan")}),
        ("unknown_article", {"unknown_article": "0.1"}),
        ("articles", {"articles": 0}),
        ("users", {"users": 2.5}),
        ("rate", {"rate": 0}),
        ("rate", {"rate": float("inf")}),
        ("events", {"events": 0}),
        ("duration", {"duration": timedelta(0)}),
        ("start", {"start": datetime(2026, 1, 1)}),
        ("file_every", {"file_every": timedelta(0)}),
        ("file_every", {"rate": 5.0, "file_every": timedelta(milliseconds=100)}),
        ("watermark", {"watermark": timedelta(milliseconds=500)}),
        ("window", {"window": timedelta(0)}),
        ("rotate_every", {"rotate_every": timedelta(seconds=-1)}),
        ("skew", {"skew": -1.0}),
        (
            "malformed + duplicates + late + out_of_order",
            {"malformed": 0.5, "duplicates": 0.5},
        ),
    ],
)
def test_invalid_specs_name_the_field_and_the_value(
    field_name: str, changes: dict[str, Any]
) -> None:
    with pytest.raises(SpecError) as caught:
        TrendingSpec(**changes)
    assert caught.value.field == field_name
    assert isinstance(caught.value, ValueError)
    assert f"{field_name} must be " in str(caught.value)
    assert f"; got {field_name}=" in str(caught.value)


def test_validation_message_reads_well() -> None:
    with pytest.raises(SpecError, match=r"^late must be a number in \[0, 1\); got late=1\.5$"):
        TrendingSpec(late=1.5)
    with pytest.raises(SpecError, match=r"got watermark=500ms$"):
        TrendingSpec(watermark=timedelta(milliseconds=500))


def test_start_is_normalised_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    spec = TrendingSpec(start=datetime(2026, 1, 1, 2, 0, tzinfo=plus_two))
    assert spec.start == datetime(2026, 1, 1, tzinfo=UTC) and spec.start.tzinfo is UTC
