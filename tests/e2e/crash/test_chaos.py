"""The fault campaign's fixed seeds in the suite (tests/chaos/; `make chaos SEEDS=N` runs more):
each scenario ends exact, or refused with a code and exact after the documented way out.

Seed 1271: mobile into SQLite over 8 generated files of 20 s (malformed, late, out-of-order and
duplicated records): a SIGKILL a seeded delay into a batch, the latest file-source log cut to
nothing (CHECKPOINT_DAMAGED, then `reset --outputs` and a rebuild from the landed files), a
restart with --window 40s on the 20-second checkpoint (STATE_INCOMPATIBLE, then the old window),
and a run to completion compared with the model over every file landed.

Seed 2622 (the 4.2 line's leg, `make test-delta`): mobile into a Delta table over 8 files, the
process SIGKILLed after Delta's commit and before Spark's (the replay's commit is skipped by
Delta's txnAppId/txnVersion), then inside the MERGE before Delta's commit, and a run to
completion, the table read back by delta-rs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.campaign import run_seed
from tests.chaos.scenario import plan

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEEDS = (1271,)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_fixed_seed_of_the_campaign_ends_exact(seed: int, tmp_path: Path) -> None:
    kinds = {fault.kind for fault in plan(seed).faults}
    assert {"kill-random", "damage", "window"} <= kinds  # the seed still covers what it should
    outcome = run_seed(seed, tmp_path, keep=True)
    print(outcome.line())
    assert outcome.verdict != "defect", outcome.line()
    assert len(outcome.injected) == len(plan(seed).faults), outcome.line()
    assert outcome.refusals == [
        "CHECKPOINT_DAMAGED -> reset --outputs",
        "STATE_INCOMPATIBLE -> revert the change",
    ], outcome.line()


@pytest.mark.delta
def test_a_fixed_delta_seed_of_the_campaign_ends_exact(tmp_path: Path) -> None:
    scenario = plan(2622)
    assert scenario.sink == "delta" and {f.kind for f in scenario.faults} == {
        "kill-after-write",
        "kill-in-sink",
    }
    outcome = run_seed(2622, tmp_path, keep=True)
    print(outcome.line())
    assert outcome.verdict == "exact", outcome.line()
    assert sorted(outcome.injected) == ["kill-after-write", "kill-in-sink"], outcome.line()
