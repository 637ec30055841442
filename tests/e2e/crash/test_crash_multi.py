"""Crash suite for the pipelines of several outputs (and inputs): `activity` (per-user state with
timers, alerts, sessions) and `ads` (a stream-stream join of two inputs and a catalog).

Real processes, SIGKILLed at seeded random moments inside and between batches, restarted from
the same checkpoint (tests/e2e/crash/test_crash.py's Chain). The files are made so that no record is
late however they are batched, so the final tables do not depend on where the kills land; each is
compared with pandas over all the files: no attributed click lost or doubled, each alert and
each session once, one status row per user with the status its actions call for."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from slipstream.core.files import write_atomically
from tests import stream_reference as ref
from tests.e2e.crash.test_crash import SEED, Chain, CrashCase
from tests.helpers import quarantine_records

pytestmark = [pytest.mark.slow]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FILE_MINUTES = 4  # activity: event time per landing
ADS_FILE_MINUTES = 20  # ads: more, so the 3-hour watermark passes some unclicked impressions
KILLS = ("random", "random", "random")


def _ts(moment: datetime) -> str:
    return ref.iso_exact(moment)


class Flags(CrashCase):
    """A pipeline and its extra flags: this suite lands its own files and computes its own
    expectations (MultiChain), so a CrashCase's generator and results are not used."""

    def __init__(self, pipeline: str, *flags: str) -> None:
        self.pipeline, self.flags = pipeline, list(flags)

    def args(self) -> list[str]:
        return self.flags


@dataclass
class MultiChain(Chain):
    """A Chain whose files go to one folder per stream input, made by `make(rng, index)` ->
    {input: lines}; `bad` counts the lines each input's quarantine must hold."""

    make: Any = None
    bad: dict[str, int] = field(default_factory=dict)
    landed: dict[str, list[Path]] = field(default_factory=dict)

    def land(self, count: int) -> None:
        for _ in range(count):
            index = len(self.files)
            stamp = time.time()
            for name, (lines, bad) in self.make(self.rng, index).items():
                folder = self.input / name
                folder.mkdir(exist_ok=True)
                path = write_atomically(folder, f"{name}-{index:04d}.json", lines, mtime=stamp)
                self.landed.setdefault(name, []).append(path)
                self.bad[name] = self.bad.get(name, 0) + bad
            self.files.append(self.input / f"#{index}")  # one entry per landing

    def command(self) -> list[str]:
        base = super().command()
        at = base.index("--input")
        names = self.make(random.Random(0), 0).keys()
        inputs = [x for n in names for x in ("--input", f"{n}={self.input / n}")]
        return base[:at] + inputs + base[at + 2 :]


def _lines(path: list[Path]) -> list[str]:
    return [line for p in path for line in p.read_text().splitlines()]


# --- activity ----------------------------------------------------------------------------------

USERS = ("u1", "u2", "u3", "u4", "u5", "u6")
STOP = {"u1": 2, "u2": 4}  # they act in files before these, then never again: inactive
INACTIVE = timedelta(minutes=20)


def activity_files(rng: random.Random, index: int) -> dict[str, tuple[list[str], int]]:
    start = T0 + timedelta(minutes=FILE_MINUTES * index)
    lines = []
    for user in USERS:
        if index >= STOP.get(user, 10**6):
            continue
        for _ in range(rng.randint(2, 4)):
            moment = start + timedelta(milliseconds=rng.randrange(FILE_MINUTES * 60_000))
            action = rng.choice(("click", "scroll", "purchase", "open", "close", "crash"))
            lines.append(json.dumps({"user_id": user, "action": action, "ts": _ts(moment)}))
    if index == 2:  # u4 bursts: 35 actions within one minute
        minute = start.replace(second=0)
        lines += [
            json.dumps({"user_id": "u4", "action": "click",
                        "ts": _ts(minute + timedelta(milliseconds=1_500 * n + 7))})
            for n in range(35)
        ]  # fmt: skip
    bad = 0
    if index % 3 == 1:
        lines += ["not json", json.dumps({"user_id": "u3", "action": "fly", "ts": _ts(start)})]
        bad = 2
    rng.shuffle(lines)
    return {"actions": (lines, bad)}


def check_activity(chain: MultiChain, db: Path) -> list[str]:
    now = datetime.now(UTC)
    lines = _lines(chain.landed["actions"])
    kept = [r for r in (ref.activity_action(x, now) for x in lines) if r is not None]
    frame = pd.DataFrame(kept).drop_duplicates(["user_id", "action", "ts"])
    final = frame["ts"].max() - timedelta(minutes=10)
    with sqlite3.connect(db) as conn:
        status = pd.read_sql_query("SELECT * FROM user_status", conn)
        alerts = pd.read_sql_query("SELECT * FROM user_alerts", conn)
        sessions = pd.read_sql_query("SELECT * FROM user_sessions", conn)
    assert not status["user_id"].duplicated().any()
    got = {r.user_id: r for r in status.itertuples()}
    assert set(got) == set(frame["user_id"])
    inactive = set()
    for user, group in frame.sort_values("ts", kind="stable").groupby("user_id"):
        last = group.iloc[-1]
        gone = last["ts"] + INACTIVE <= final
        inactive |= {user} if gone else set()
        want = "inactive" if gone else ref.status_of(last["action"])
        row = got[user]
        assert (row.status, row.last_action, row.actions) == (want, last["action"], len(group))
        assert row.last_seen == _ts(last["ts"])
    assert inactive == set(STOP)  # the users who stopped, and no other
    crashes = sorted((u, _ts(t)) for u, a, t in frame[["user_id", "action", "ts"]].values
                     if a == "crash")  # fmt: skip
    got_crashes = sorted(
        (r.user_id, r.alert_time) for r in alerts.itertuples() if r.alert == "crash"
    )
    assert got_crashes == crashes and crashes  # each crash once: none lost, none doubled
    bursts = [(r.user_id, r.alert_time) for r in alerts.itertuples() if r.alert == "burst"]
    assert bursts == [("u4", _ts(T0.replace(minute=8)))]
    want_sessions = ref.sessions(kept, timedelta(minutes=30), final)
    got_sessions = {(r.user_id, r.session_start): r.actions for r in sessions.itertuples()}
    assert not sessions.duplicated(["user_id", "session_start"]).any()
    assert got_sessions == want_sessions
    return [
        f"activity: {len(status)} users ({len(inactive)} inactive), {len(alerts)} alerts, "
        f"{len(sessions)} sessions, {len(frame)} actions: equal to pandas"
    ]


# --- ads ---------------------------------------------------------------------------------------


def ads_files(rng: random.Random, index: int) -> dict[str, tuple[list[str], int]]:
    """Impressions and clicks of minutes [20i, 20i + 20). Clicks go to impressions of the last 70
    minutes (some more than an hour before: not attributed), each impression clicked once at
    most. The impressions so far are replayed from the seed, so any file can be made alone."""
    pool: list[tuple[str, str, datetime]] = []
    clicked: set[str] = set()
    replay = random.Random(f"{SEED}-ads")
    for i in range(index + 1):
        start = T0 + timedelta(minutes=ADS_FILE_MINUTES * i)
        impressions = []
        for n in range(replay.randint(10, 20)):
            moment = start + timedelta(milliseconds=replay.randrange(ADS_FILE_MINUTES * 60_000))
            impressions.append((f"i{i:03d}-{n:02d}", f"ad00{replay.randint(1, 3)}", moment))
        pool += impressions
        clicks = []
        recent = [p for p in pool if p[0] not in clicked and p[2] >= start - timedelta(minutes=70)]
        for iid, ad, moment in replay.sample(recent, min(6, len(recent))):
            at = max(moment, start) + timedelta(milliseconds=replay.randrange(60_000))
            clicked.add(iid)
            clicks.append((f"c-{iid}", iid, ad, at))
    imp_lines = [json.dumps({"impression_id": iid, "ad_id": ad, "user_id": "u",
                             "impression_time": _ts(m)}) for iid, ad, m in impressions]  # fmt: skip
    click_lines = [json.dumps({"click_id": cid, "impression_id": iid, "ad_id": ad, "user_id": "u",
                               "click_time": _ts(m)}) for cid, iid, ad, m in clicks]  # fmt: skip
    click_lines += click_lines[:1]  # a click sent twice: counted once
    bad = 0
    if index % 3 == 2:
        imp_lines.append("{broken")
        bad = 1
    rng.shuffle(imp_lines)
    return {"impressions": (imp_lines, bad), "clicks": (click_lines, 0)}


def check_ads(chain: MultiChain, db: Path, catalog: Path) -> list[str]:
    imps = pd.DataFrame([json.loads(x) for x in _lines(chain.landed["impressions"])
                         if x.startswith("{\"")])  # fmt: skip
    clicks = pd.DataFrame([json.loads(x) for x in _lines(chain.landed["clicks"])])
    clicks = clicks.drop_duplicates("click_id")
    for frame, column in ((imps, "impression_time"), (clicks, "click_time")):
        frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
    joined = imps.merge(clicks, on=["impression_id", "ad_id"], suffixes=("", "_click"))
    delay = joined["click_time"] - joined["impression_time"]
    attributed = joined[(delay >= pd.Timedelta(0)) & (delay <= pd.Timedelta(hours=1))]
    with sqlite3.connect(db) as conn:
        got = pd.read_sql_query("SELECT * FROM ad_clicks_attributed", conn)
        outcome = pd.read_sql_query("SELECT * FROM ad_impressions_outcome", conn)
    assert not got["click_id"].duplicated().any()
    assert sorted(got["click_id"]) == sorted(attributed["click_id"])
    costs = {"ad001": 0.5, "ad002": 1.25, "ad003": 2.0}
    assert all(costs[a] == c for a, c in zip(got["ad_id"], got["cost_per_click"], strict=True))
    assert not outcome["impression_id"].duplicated().any()
    clicked = dict(zip(attributed["impression_id"], attributed["click_id"], strict=True))
    assert {i: c for i, c in zip(outcome["impression_id"], outcome["click_id"], strict=True)
            if c is not None} == clicked  # fmt: skip
    # the watermark: the slower input's, min(newest impression - 2h, newest click - 3h)
    final = min(imps["impression_time"].max() - pd.Timedelta(hours=2),
                clicks["click_time"].max() - pd.Timedelta(hours=3))  # fmt: skip
    unmatched = set(imps["impression_id"]) - set(clicked)
    emitted = set(outcome.loc[outcome["click_id"].isna(), "impression_id"])
    surely = set(imps.loc[imps["impression_time"] + pd.Timedelta(hours=1, minutes=5) < final,
                          "impression_id"]) - set(clicked)  # fmt: skip
    assert surely <= emitted <= unmatched and surely
    assert len(attributed) < len(clicks)  # some clicks came more than an hour after
    return [
        f"ads: {len(got)} attributed clicks (of {len(clicks)}), {len(outcome)} outcomes "
        f"({len(emitted)} unclicked, once final): equal to pandas, none twice"
    ]


# --- the suite ---------------------------------------------------------------------------------


@pytest.mark.spark
def test_multi_output_pipelines_survive_sigkills_exactly_once(spark: Any, tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.csv"
    catalog.write_text(
        "ad_id,campaign,cost_per_click\nad001,spring,0.50\nad002,travel,1.25\nad003,cars,2.00\n"
    )
    dbs = {name: tmp_path / name / "results.db" for name in ("activity", "ads")}
    case = {
        "activity": Flags("activity", "--inactive-after", "20m"),
        "ads": Flags("ads", "--input", f"catalog={catalog}"),
    }
    chains = {
        name: MultiChain(
            case[name], name, ["--sink", f"sqlite:{dbs[name]}"], tmp_path / name,
            random.Random(f"{SEED}-{name}"), make=make,
        )
        for name, make in (("activity", activity_files), ("ads", ads_files))
    }  # fmt: skip

    def drive(name: str) -> None:
        chains[name].crash_loop(list(KILLS), (2, 3))
        # and enough event time to pass the watermarks: ads' outcome must emit some
        # impressions as unmatched (3 kill cycles land fewer files than the 4 did)
        chains[name].land(8)
        code = chains[name].wait(chains[name].start())
        assert code == 0, f"{name}: final run exit {code}; see {chains[name].logs[-1]}"

    started = time.monotonic()
    with ThreadPoolExecutor(len(chains)) as pool:
        for future in [pool.submit(drive, name) for name in chains]:
            future.result()
    report = [f"crash suite activity and ads, seed {SEED}, {time.monotonic() - started:.0f}s"]
    report += check_activity(chains["activity"], dbs["activity"])
    report += check_ads(chains["ads"], dbs["ads"], catalog)
    for name, chain in chains.items():
        report.append(f"  {name}: {len(chain.kills)} kills, {chain.runs} runs, "
                      f"{len(chain.files)} landings")  # fmt: skip
        report += [
            f"      {k.kind:<8} {k.where} ({k.seconds:.1f}s after start)" for k in chain.kills
        ]
        for stream, bad in chain.bad.items():
            folder = chain.workdir / "state" / "quarantine" / name / stream
            rows = len(quarantine_records(folder)) if bad else 0
            assert rows == bad, f"{name}.{stream}: quarantine {rows} rows, {bad} bad lines"
    print("\n".join(report))
    kills = [k for chain in chains.values() for k in chain.kills]
    assert len(kills) >= 4, report
    assert any(k.where.startswith("inside") for k in kills), report
