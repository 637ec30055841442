"""Independent models of the sensors, iot_steps and temperature_load pipelines, for the tests:
plain Python and pandas, no slipstream code.

Lines are parsed with `json` and `datetime` under the pipelines' documented rules (required
fields, strict JSON types, event time at most a day ahead). Spark's micro-batch semantics are
modelled as documented in pipelines/trending.py: with one file per batch, in batch k a row is
late when its event time is at or before (max valid event time of batches <= k-2) - watermark;
late rows are dropped before deduplication; windows are aligned to the epoch."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def json_object(line: str) -> dict[str, Any] | None:
    """A line's JSON object, or None (not JSON, or JSON but not an object)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def sensor_reading(line: str, now: datetime) -> dict[str, Any] | None:
    """The valid reading of a line, or None (malformed, or dropped as too far ahead)."""
    doc = json_object(line)
    if doc is None:
        return None
    fields = ("sensor_id", "event_time", "value", "error_code")
    sensor, ts, value, code = (doc.get(k) for k in fields)
    moment = parse_time(ts)
    if not isinstance(sensor, str) or moment is None or not _number(value):
        return None
    if code is not None and not isinstance(code, str):
        return None
    if moment > now + timedelta(days=1):
        return None
    return {"sensor_id": sensor, "event_time": moment, "value": float(value), "error_code": code}


def iot_record(line: str, now: datetime) -> dict[str, Any] | None:
    """The valid device record of a line (seed 004's schema, strict types), or None."""
    doc = json_object(line)
    if doc is None:
        return None
    moment = parse_time(doc.get("timestamp"))
    if moment is None or not _number(doc.get("id")) or not _number(doc.get("num_steps")):
        return None
    numbers = ("user_id", "device_id", "miles_walked", "calories_burnt")
    if any(doc.get(k) is not None and not _number(doc[k]) for k in numbers):
        return None
    if doc.get("value") is not None and not isinstance(doc["value"], str):
        return None
    if moment > now + timedelta(days=1):
        return None
    return {"timestamp": moment, "num_steps": doc["num_steps"], "id": doc["id"]}


def counted(
    batches: Sequence[Sequence[str]],
    parse: Callable[[str], dict[str, Any] | None],
    time: str,
    key: Callable[[dict[str, Any]], Any] | None,
    watermark: timedelta,
    window: timedelta | None = None,
    ids: Sequence[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records that count, and what happened to the others: invalid, late, duplicates,
    and the final watermark (max valid event time - watermark). With a `key`, a deduplication
    drops late rows (by their own time); without one, an aggregation over tumbling `window`s
    does (by their window's end, which is exclusive).

    A row of batch B is late by the watermark of batch B-1, made from the batches before B-1
    (Spark's watermark for late rows). `ids`: the query's batch id of each of `batches`
    (`data_batch_ids`); a gap is a no-data batch Spark ran for a new watermark, after which
    the next batch judges by every batch before it. Default: back to back, 0, 1, 2, ..."""
    ids = list(range(len(batches))) if ids is None else list(ids)
    assert len(ids) == len(batches), (len(ids), len(batches))
    maxima: list[datetime | None] = []
    seen: set[Any] = set()
    kept: list[dict[str, Any]] = []
    stats: dict[str, Any] = {"invalid": 0, "late": 0, "duplicates": 0}
    for k, lines in enumerate(batches):
        earlier = [m for j, m in enumerate(maxima) if ids[j] < ids[k] - 1 and m is not None]
        late_at = max(earlier) - watermark if earlier else None
        batch_max = None
        for line in lines:
            record = parse(line)
            if record is None:
                stats["invalid"] += 1
                continue
            moment = record[time]
            batch_max = moment if batch_max is None else max(batch_max, moment)
            if key is None and window is not None:
                moment = window_start(moment, window) + window
            if late_at is not None and moment <= late_at:
                stats["late"] += 1
                continue
            if key is not None:
                if key(record) in seen:
                    stats["duplicates"] += 1
                    continue
                seen.add(key(record))
            kept.append(record)
        maxima.append(batch_max)
    valid = [m for m in maxima if m is not None]
    stats["watermark"] = max(valid) - watermark if valid else None
    return kept, stats


def counted_readings(
    batches: Sequence[Sequence[str]], watermark: timedelta, ids: Sequence[int] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`counted` for sensor readings: valid by `sensor_reading`, a re-sent reading being one
    with the same sensor and event time."""
    now = datetime.now(UTC)
    return counted(
        batches,
        lambda line: sensor_reading(line, now),
        "event_time",
        lambda r: (r["sensor_id"], r["event_time"]),
        watermark,
        ids=ids,
    )


def window_start(moment: datetime, length: timedelta) -> datetime:
    return EPOCH + ((moment - EPOCH) // length) * length


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_exact(moment: datetime) -> str:
    """As the sinks write timestamps: whole seconds, or with microseconds when present."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return (text[:-7] if text.endswith(".000000") else text) + "Z"


def window_starts(moment: datetime, length: timedelta, slide: timedelta) -> list[datetime]:
    """The starts of every window `[start, start + length)` holding `moment`, windows starting
    at every multiple of `slide` since the epoch (tumbling when `slide == length`)."""
    start, out = window_start(moment, slide), []
    while start + length > moment:
        out.append(start)
        start -= slide
    return out


def sensor_stats(
    readings: list[dict[str, Any]], length: timedelta, slide: timedelta | None = None
) -> dict[tuple[str, str], dict]:
    """(window_start, sensor_id) -> readings, mean, min, max, stddev (sample; None for one
    reading) and the sorted error codes; windows of `length` every `slide` (default: tumbling)."""
    step = slide or length
    frame = pd.DataFrame(
        [
            {**r, "window_start": iso(start)}
            for r in readings
            for start in window_starts(r["event_time"], length, step)
        ]
    )
    out = {}
    for (start, sensor), group in frame.groupby(["window_start", "sensor_id"]):
        std = group["value"].std(ddof=1)
        out[(start, sensor)] = {
            "readings": len(group),
            "mean_value": group["value"].mean(),
            "min_value": group["value"].min(),
            "max_value": group["value"].max(),
            "stddev_value": None if math.isnan(std) else std,
            "error_codes": sorted(set(group["error_code"].dropna())),
        }
    return out


def step_sums(records: list[dict[str, Any]], length: timedelta) -> dict[str, int]:
    """window_start -> sum of num_steps (tumbling windows of `length`)."""
    out: dict[str, int] = {}
    for record in records:
        start = iso(window_start(record["timestamp"], length))
        out[start] = out.get(start, 0) + record["num_steps"]
    return out


def sensor_baseline(readings: list[dict[str, Any]]) -> dict[str, dict]:
    frame = pd.DataFrame(readings)
    return {
        sensor: {
            "readings": len(group),
            "baseline_value": group["value"].mean(),
            "error_codes": sorted(set(group["error_code"].dropna())),
        }
        for sensor, group in frame.groupby("sensor_id")
    }


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


ACTIONS = ("open", "click", "scroll", "purchase", "crash", "close")


def mobile_action(line: str) -> dict[str, Any] | None:
    """A line's valid action under mobile's rules (a string id and action, a readable ts), or
    None."""
    doc = json_object(line)
    if doc is None:
        return None
    moment = parse_time(doc.get("ts"))
    if not isinstance(doc.get("id"), str) or not isinstance(doc.get("action"), str):
        return None
    return None if moment is None else {"action": doc["action"], "ts": moment}


def activity_action(line: str, now: datetime) -> dict[str, Any] | None:
    doc = json_object(line)
    if doc is None:
        return None
    user, action, moment = doc.get("user_id"), doc.get("action"), parse_time(doc.get("ts"))
    if not isinstance(user, str) or not isinstance(action, str) or moment is None:
        return None
    if action not in ACTIONS or moment > now + timedelta(days=1):
        return None
    return {"user_id": user, "action": action, "ts": moment}


def status_of(action: str) -> str:
    return {"close": "closed", "crash": "crashed"}.get(action, "active")


def activity_status(
    batches: Sequence[Sequence[str]], now: datetime, watermark: timedelta, inactive: timedelta
) -> dict[str, dict[str, Any]]:
    """The user_status table after the run, replayed batch by batch as Spark runs it: a batch's
    rows at or before the late watermark (the newest event time two batches back - delay) are
    dropped, a re-sent action counts once, and after the batch's rows, timers at or before the
    eviction watermark (one batch back) fire: the user is written inactive and forgotten."""
    maxima: list[datetime] = []
    seen: set[tuple[str, str, datetime]] = set()
    state: dict[str, dict[str, Any]] = {}
    table: dict[str, dict[str, Any]] = {}

    def fire(until: datetime | None) -> None:
        for user in [u for u, s in state.items() if until is not None and s["due"] <= until]:
            table[user] = {**state.pop(user), "status": "inactive"}

    for k, lines in enumerate([*batches, []]):  # and the no-data batch the last one calls for
        late_at = max(maxima[: max(k - 1, 0)], default=None)
        evict_at = max(maxima[:k], default=None)
        records = [r for r in (activity_action(line, now) for line in lines) if r is not None]
        if records:
            maxima.append(max(r["ts"] for r in records))
        elif lines:
            maxima.append(maxima[-1] if maxima else EPOCH)
        for r in records:
            key = (r["user_id"], r["action"], r["ts"])
            if (late_at is not None and r["ts"] <= late_at - watermark) or key in seen:
                continue
            seen.add(key)
            s = state.setdefault(r["user_id"], {"actions": 0, "last_seen": None})
            s["actions"] += 1
            if s["last_seen"] is None or r["ts"] >= s["last_seen"]:
                s["last_action"], s["last_seen"] = r["action"], r["ts"]
            s["due"] = s["last_seen"] + inactive
            table[r["user_id"]] = {**s, "status": status_of(s["last_action"])}
        fire(None if evict_at is None else evict_at - watermark)
        if not lines:  # the final no-data batch: everything seen moves the watermark
            fire(max(maxima) - watermark if maxima else None)
    return {
        u: {k: v for k, v in row.items() if k in ("status", "last_action", "last_seen", "actions")}
        for u, row in table.items()
    }


def sessions(
    actions: list[dict[str, Any]], gap: timedelta, final: datetime
) -> dict[tuple[str, str], int]:
    """(user_id, session_start) -> actions: sessions of actions at most `gap` apart, those
    ending (last action + gap) at or before the `final` watermark."""
    out: dict[tuple[str, str], int] = {}
    by_user: dict[str, list[datetime]] = {}
    for a in actions:
        by_user.setdefault(a["user_id"], []).append(a["ts"])
    for user, times in by_user.items():
        times.sort()
        start, last, n = times[0], times[0], 0
        for t in [*times, None]:
            if t is not None and t - last <= gap:
                last, n = t, n + 1
                continue
            if last + gap <= final:
                out[(user, iso_exact(start))] = n
            if t is not None:
                start, last, n = t, t, 1
    return out
