"""The record step: what a start writes before any query runs, once every refusal has passed.

Each checkpoint's build record (after the state it holds was judged to fit this run's queries,
runtime/compat.py), a new checkpoint's start (`--from-checkpoint`, runtime/from_checkpoint.py),
the ingest and shared stages' marks (runtime/ingest_stage.py, shared_stage.py), the outputs
this checkpoint owns and the quarantine folders its outputs write (runtime/ownership.py)."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from slipstream.runtime import shared_stage
from slipstream.runtime.bound import Prepared
from slipstream.runtime.build import Query
from slipstream.runtime.checks import restart_verdicts
from slipstream.runtime.compat import refuse_or_record
from slipstream.runtime.from_checkpoint import begin
from slipstream.runtime.ingest_stage import mark_checkpoints
from slipstream.runtime.ownership import claim_quarantines, record_outputs

_log = logging.getLogger("slipstream")


def _say(line: str) -> None:
    _log.warning(line)


def record_start(spark: SparkSession, prepared: Prepared, built: list[Query]) -> None:
    """Refuse a checkpoint whose state does not fit (STATE_INCOMPATIBLE), else record: the
    build, `--from-checkpoint`'s start, the ingest stage's marks, the outputs' owner."""
    refuse_or_record(prepared, restart_verdicts(spark, prepared, built), _say)
    begin(prepared, _say)
    mark_checkpoints(prepared, {b.name for b in prepared.inputs.values() if b.staged})
    shared_stage.mark_checkpoints(prepared)
    claim_quarantines(built)
    record_outputs(prepared)
