"""Consumer lag of Kafka inputs, read from a batch's progress (no Kafka client, no Spark).

Spark's Kafka source reports, per batch, the offsets it read up to (`endOffset`) and the
newest offsets on the broker when the batch was planned (`latestOffset`), per topic and
partition. Their difference is how many records the query was behind after that batch: 0 when
it keeps up, growing when it falls behind (or when `maxOffsetsPerTrigger` caps a backfill).
Where the offsets are missing, the source's own `maxOffsetsBehindLatest` metric is used."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

#: batches in a row whose lag rose each time: the query is falling behind its topic
GROWING_BATCHES = 3


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if not isinstance(value, dict):
        return {}
    return {
        topic: {str(p): int(o) for p, o in parts.items()}
        for topic, parts in value.items()
        if isinstance(parts, dict)
    }


def is_kafka(source: dict[str, Any]) -> bool:
    return str(source.get("description", "")).startswith("Kafka")


def partition_lag(progress: dict[str, Any]) -> dict[str, int] | None:
    """Records behind latest after this batch, by `TOPIC:PARTITION`, over the Kafka sources
    of one query's progress; None when it reads no Kafka."""
    kafka = [s for s in progress.get("sources") or [] if is_kafka(s)]
    if not kafka:
        return None
    lag: dict[str, int] = {}
    for source in kafka:
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        for topic, parts in latest.items():
            for partition, newest in parts.items():
                done = end.get(topic, {}).get(partition, 0)
                lag[f"{topic}:{partition}"] = max(0, newest - done)
        if not latest:  # offsets not reported: the source's own maximum
            behind = (source.get("metrics") or {}).get("maxOffsetsBehindLatest")
            if behind is not None:
                lag[str(source.get("description"))] = int(float(behind))
    return lag


def total_lag(progress: dict[str, Any]) -> int | None:
    lag = partition_lag(progress)
    return None if lag is None else sum(lag.values())


def growing_lag(lags: Sequence[int | None]) -> str | None:
    """A verdict when the lag of the last GROWING_BATCHES batches (oldest first; None: a batch
    without Kafka offsets) rose at every batch: records arrive faster than the query reads
    them. None otherwise (a capped backfill's lag falls; a query that keeps up stays at 0)."""
    last = [lag for lag in lags if lag is not None][-GROWING_BATCHES:]
    if len(last) < GROWING_BATCHES or any(b <= a for a, b in zip(last, last[1:], strict=False)):
        return None
    path = " -> ".join(f"{lag:,}" for lag in last)
    return f"Kafka lag growing: {path} records behind latest over the last {len(last)} batches"
