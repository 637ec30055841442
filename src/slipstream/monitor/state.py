"""The state a query's checkpoint holds, read from the checkpoint alone (`slipstream state`).

Spark's `state-metadata` reader lists a checkpoint's stateful operators (id, name, store,
partitions, the batches it holds state for); its `statestore` reader loads one operator's rows
as of a batch (`key`, `value`, `partition_id`). Neither needs the query to run (a running one is
fine: they read committed versions). Bytes on disk are the files under `state/<operator id>`;
the watermark is the one the batch's offset log carries; the oldest and newest event time held
are the smallest and largest timestamps in the keys (a window's start and end).

A running query reports the same operators in each batch's progress (`stateOperators`):
`live_operators` reads them into the same `OperatorState`, with the rows held and the memory
the store uses, for `status`, `/metrics` and the dashboard."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slipstream.checkpoint.integrity import BUILD_RECORD
from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import batch_offsets


@dataclass
class OperatorState:
    operator_id: int
    operator: str  # Spark's name: stateStoreSave, dedupeWithinWatermark, symmetricHashJoin...
    store: str
    partitions: int
    latest_batch: int
    rows: int | None = None
    bytes_on_disk: int = 0
    watermark: str | None = None
    oldest_event_time: str | None = None
    newest_event_time: str | None = None
    sample: list[str] = field(default_factory=list)  # --keys N: key and value as JSON
    error: str | None = None  # what the reader said, when it could not read the rows
    memory_bytes: int | None = None  # a running query's report: memory the store uses

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def live_dict(self) -> dict[str, Any]:
        """What `status --json` and the dashboard show of a running query's operator."""
        shown = ("operator_id", "operator", "store", "rows", "memory_bytes")
        return {name: getattr(self, name) for name in shown}


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value == value else 0


def live_operators(progress: Mapping[str, Any], rows_counted: bool = True) -> list[OperatorState]:
    """The stateful operators of one batch's progress report, in plan order (their ids); rows
    None where the stores did not count them (a finite run: runtime/partitions.py)."""
    found = []
    ops = progress.get("stateOperators")
    for index, op in enumerate(ops if isinstance(ops, list) else []):
        if not isinstance(op, Mapping):
            continue
        custom = op.get("customMetrics")
        rocksdb = isinstance(custom, Mapping) and any(k.startswith("rocksdb") for k in custom)
        found.append(
            OperatorState(
                operator_id=index,
                operator=str(op.get("operatorName") or "state"),
                store="rocksdb" if rocksdb else "default",
                partitions=_count(op.get("numStateStoreInstances")),
                latest_batch=_count(progress.get("batchId")),
                rows=_count(op.get("numRowsTotal")) if rows_counted else None,
                memory_bytes=_count(op.get("memoryUsedBytes")),
            )
        )
    return found


def operator_label(op: OperatorState) -> str:
    """`0:stateStoreSave`: an operator's id and Spark's name, as /metrics labels it."""
    return f"{op.operator_id}:{op.operator}"


def _bytes(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _watermark(checkpoint: Path, batch: int) -> str | None:
    try:
        millis = batch_offsets(checkpoint, batch).watermark_ms
    except (OSError, ValueError, KeyError, IndexError):
        return None
    if millis <= 0:
        return None
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat().replace("+00:00", "Z")


def _timestamp_paths(schema: Any, prefix: str) -> list[str]:
    """The columns of timestamp type inside a struct (nested structs too), as paths."""
    from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

    paths = []
    for f in schema.fields:
        path = f"{prefix}.`{f.name}`"
        if isinstance(f.dataType, StructType):
            paths += _timestamp_paths(f.dataType, path)
        elif isinstance(f.dataType, (TimestampType, TimestampNTZType)):
            paths.append(path)
    return paths


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)


def no_state(checkpoint: Path) -> str:
    """Why a query checkpoint holds no state (read_state found no operator), in words: a
    checkpoint with no committed batch says nothing about the query, and one whose build
    record names stateful operators is not a stateless query."""
    checkpoint = Path(checkpoint)
    if last_committed_batch(checkpoint) is None:
        return "no state yet: no batch is committed in this checkpoint (new, reset or emptied)"
    import json

    try:
        build = json.loads((checkpoint / BUILD_RECORD).read_text(encoding="utf-8"))
        operators = [str(op["operator"]) for op in build["state"]["operators"]]
    except (OSError, ValueError, KeyError, TypeError):
        return "no state: no state folder (a stateless query, or its state was deleted)"
    if operators:
        return (
            f"no state: its state folder is missing, yet the query keeps state "
            f"({', '.join(operators)}): the checkpoint is damaged"
        )
    return "no state: a stateless query"


#: a transformWithState whose only state is its timers is read by the reader's timer option
TIMERS = "$timers"  # "$" starts no user's variable: Spark reserves it


def _first_variable(properties: Any) -> str | None:
    """A transformWithState's first state variable other than its timers, or TIMERS when its
    timers are all it keeps (the state-metadata source's `operatorProperties`; slipstream's
    deduplication by timers holds an id by its timer alone), or None for Spark's other
    operators."""
    try:
        variables = json.loads(properties)["stateVariables"]
    except (TypeError, ValueError, KeyError):
        return None
    kinds = [
        (str(v.get("stateName")), v.get("stateVariableType"))
        for v in variables
        if isinstance(v, dict)
    ]
    names = [name for name, kind in kinds if kind != "TimerState"]
    if names:
        return names[0]
    return TIMERS if kinds else None


def read_state(
    spark: Any, checkpoint: Path, *, batch: int | None = None, keys: int = 0
) -> list[OperatorState]:
    """Every stateful operator of one query checkpoint, as of `batch` (default: the latest)."""
    from pyspark.sql import functions as F

    checkpoint = Path(checkpoint)
    if not (checkpoint / "state").is_dir():
        return []
    meta = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    found = []
    for row in sorted(meta, key=lambda r: (r.operatorId, r.stateStoreName)):
        latest = int(row.maxBatchId if batch is None else batch)
        op = OperatorState(
            operator_id=int(row.operatorId),
            operator=str(row.operatorName),
            store=str(row.stateStoreName),
            partitions=int(row.numPartitions),
            latest_batch=latest,
            bytes_on_disk=_bytes(checkpoint / "state" / str(row.operatorId)),
            watermark=_watermark(checkpoint, latest),
        )
        found.append(op)
        reader = (
            spark.read.format("statestore")
            .option("operatorId", op.operator_id)
            .option("storeName", op.store)
            .option("batchId", latest)
        )
        variable = _first_variable(getattr(row, "operatorProperties", None))
        if variable == TIMERS:  # its rows are its timers, one per key
            reader = reader.option("readRegisteredTimers", "true")
        elif variable is not None:  # a transformWithState: its rows are its first variable's
            reader = reader.option("stateVarName", variable)
        try:
            frame = reader.load(str(checkpoint))
            stamps = _timestamp_paths(frame.schema["key"].dataType, "key")
            aggs = [F.count(F.lit(1)).alias("rows")]
            if stamps:  # least and greatest take two columns or more
                lows, highs = [F.min(F.col(p)) for p in stamps], [F.max(F.col(p)) for p in stamps]
                aggs.append((F.least(*lows) if len(lows) > 1 else lows[0]).alias("oldest"))
                aggs.append((F.greatest(*highs) if len(highs) > 1 else highs[0]).alias("newest"))
            totals = frame.agg(*aggs).collect()[0]
            op.rows = int(totals["rows"])
            if stamps:
                op.oldest_event_time = _iso(totals["oldest"])
                op.newest_event_time = _iso(totals["newest"])
            if keys > 0:
                sample = frame.select(F.to_json(F.struct("key", "value")).alias("j")).limit(keys)
                op.sample = [str(r["j"]) for r in sample.collect()]
        except Exception as exc:  # noqa: BLE001 - a store this reader cannot load: say so
            op.error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return found
