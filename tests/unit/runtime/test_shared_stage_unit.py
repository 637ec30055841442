"""When a run uses the shared stage (runtime/shared_stage.py), decided before Spark starts: a
new checkpoint in a finite run of several outputs, a checkpoint as it was made, and `true`
refused where the stage cannot run, with the reason. No Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slipstream.errors import CheckpointError, ConfigError
from slipstream.runtime import runner
from slipstream.runtime.bound import Prepared, QueryKind
from slipstream.runtime.shared_stage import MARK, check_checkpoints
from slipstream.settings.config import load_settings


def _prepare(tmp_path: Path, pipeline: str = "sensors", **flags: Any) -> Prepared:
    (tmp_path / "in").mkdir(exist_ok=True)
    given = {"input": str(tmp_path / "in"), "state_dir": tmp_path / "state", **flags}
    return runner.prepare(load_settings(pipeline, given, environ={}))


def _sharing(prepared: Prepared) -> bool:
    kinds = [o.kind for o in prepared.outputs.values()]
    assert bool(prepared.settings.shared_stage) == (QueryKind.SHARED in kinds)
    return bool(prepared.settings.shared_stage)


def test_a_new_checkpoint_shares_in_a_finite_run_and_not_live(tmp_path: Path) -> None:
    finite = _prepare(tmp_path, trigger="available-now")
    assert _sharing(finite)
    query = finite.outputs["shared.readings"]
    assert query.reads == ("readings",) and finite.inputs["readings"].shared
    assert query.ctx.query_name == "sensors.shared.readings"
    assert finite.primary.name == "sensor_stats"  # the first output stays the first
    assert not _sharing(_prepare(tmp_path))  # live: the outputs read the input themselves
    assert not _sharing(_prepare(tmp_path, "mobile", trigger="available-now"))  # nothing shared


def test_bounded_batches_do_not_share_and_true_says_why(tmp_path: Path) -> None:
    bounded = {"trigger": "available-now", "max_files_per_trigger": 1}
    assert not _sharing(_prepare(tmp_path, **bounded))
    with pytest.raises(ConfigError) as refused:
        _prepare(tmp_path, shared_stage=True, **bounded)
    assert "bounded" in refused.value.message
    with pytest.raises(ConfigError) as refused:
        _prepare(tmp_path, "mobile", shared_stage=True)
    assert "declares no steps its outputs share" in refused.value.message
    assert _sharing(_prepare(tmp_path, shared_stage=True))  # live, when asked for


def test_a_checkpoint_goes_on_as_it_was_made(tmp_path: Path) -> None:
    made = _prepare(tmp_path, trigger="available-now")
    checkpoint = made.outputs["sensor_stats"].ctx.checkpoint
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1")  # a run without the stage made it
    assert not _sharing(_prepare(tmp_path, trigger="available-now"))
    with pytest.raises(CheckpointError) as refused:
        check_checkpoints(_prepare(tmp_path, shared_stage=True))
    assert refused.value.code == "CHECKPOINT_WITHOUT_SHARED_STAGE"
    (checkpoint / MARK).write_text("")  # one made with it: live goes on with it
    assert _sharing(_prepare(tmp_path))
    with pytest.raises(CheckpointError) as refused:
        check_checkpoints(_prepare(tmp_path, shared_stage=False))
    assert refused.value.code == "CHECKPOINT_FROM_SHARED_STAGE"
