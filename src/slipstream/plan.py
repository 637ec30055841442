"""A pipeline's declared shape: what `check` explains and what validation reasons about.

Pure data, no Spark: each pipeline describes its operations for the settings it will run with,
so the rules in `slipstream.validate` run before Spark starts and are tested without it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

WindowKind = Literal["none", "tumbling", "sliding", "session"]
StreamOp = Literal["limit", "distinct", "sort"]


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]  # human-readable operations, in order
    aggregation: bool = False
    window: WindowKind = "none"
    window_column: str | None = None
    window_length: timedelta | None = None
    window_slide: timedelta | None = None
    watermark_column: str | None = None
    watermark_delay: timedelta | None = None
    watermark_before_aggregation: bool = True
    dedup: bool = False
    stream_static_join: bool = False
    stream_stream_join: bool = False
    # limit / distinct / sort applied to the stream (sort after an aggregation is allowed in
    # complete mode only; the others are never supported on streams)
    stream_ops: tuple[StreamOp, ...] = ()
    ops_after_aggregation: bool = False
    # records parsed from raw input with a quarantine (set by the runner): the parse runs behind
    # a generator barrier and the run observes metrics, operators only micro-batches support
    quarantine: bool = False

    @property
    def stateful(self) -> bool:
        return self.aggregation or self.dedup or self.stream_stream_join

    @property
    def map_like(self) -> bool:
        """Only projections and selections: what the continuous and real-time triggers allow."""
        return not (self.stateful or self.stream_static_join or self.stream_ops)
