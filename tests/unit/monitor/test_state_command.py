"""`slipstream state` on a checkpoint without state files says why, without Spark: an emptied
checkpoint is not "a stateless query" (issue 43 break 5)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from slipstream.app import operate
from slipstream.settings.config import load_settings

NO_SPARK = object()  # no state folder: the readers are never asked


def state_of(tmp_path: Path) -> str:
    settings = load_settings("mobile", {"state_dir": tmp_path / "state"}, environ={})
    out = io.StringIO()
    assert operate.state(settings, out, output="counts", spark=NO_SPARK) == 0  # type: ignore[arg-type]
    return out.getvalue()


def counts_checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "state" / "checkpoints" / "mobile" / "counts"
    folder.mkdir(parents=True)
    return folder


def committed(folder: Path, operators: list[str] | None) -> None:
    (folder / "commits").mkdir()
    (folder / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    if operators is not None:
        state = {"operators": [{"operator": o} for o in operators], "window": {}, "watermark": {}}
        (folder / "slipstream-build.json").write_text(json.dumps({"state": state}))


def test_an_emptied_checkpoint_is_not_called_a_stateless_query(tmp_path: Path) -> None:
    counts_checkpoint(tmp_path)  # its files deleted, the folder kept
    said = state_of(tmp_path)
    assert "stateless" not in said
    assert "no batch is committed" in said


def test_a_stateful_query_without_its_state_folder_is_called_damaged(tmp_path: Path) -> None:
    committed(counts_checkpoint(tmp_path), ["stateStoreSave"])
    said = state_of(tmp_path)
    assert "stateless" not in said
    assert "state folder is missing" in said and "stateStoreSave" in said and "damaged" in said


def test_a_query_recorded_without_operators_is_stateless(tmp_path: Path) -> None:
    committed(counts_checkpoint(tmp_path), [])
    assert "no state: a stateless query" in state_of(tmp_path)
