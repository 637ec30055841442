"""The benchmarks name the ingest stage in every slipstream run (bench/stage.py): its default is
changing, and a variant that relied on it would measure something else under the same name."""

from __future__ import annotations

import pytest
from bench.procs import slipstream_command
from bench.scenarios.sustained import variant_args
from bench.stage import cli_args, require_setting


def test_a_run_without_the_stage_named_is_refused() -> None:
    with pytest.raises(ValueError, match="ingest"):
        slipstream_command("run", "trending", "--input", "x")
    with pytest.raises(ValueError, match="ingest_stage"):
        require_setting({"input": "x"}, "a run of mobile")
    require_setting({"ingest_stage": False}, "a run of mobile")
    argv = slipstream_command("run", "trending", *cli_args(True))
    assert argv[-2:] == ["--ingest-stage", "true"]
    assert slipstream_command("generate", "trending")[-2:] == ["generate", "trending"]


def test_sustained_variants_name_the_stage() -> None:
    assert variant_args("ingest-stage=false") == ("--ingest-stage", "false")
    assert variant_args("ingest-stage=true,late-rows=false") == (
        "--ingest-stage",
        "true",
        "--late-rows",
        "false",
    )
    with pytest.raises(ValueError, match="ingest-stage"):
        variant_args("default")
