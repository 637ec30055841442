"""docs/howto/own-pipeline.md: the pipeline the page writes is a valid declaration, bound and
checked by the harness before any JVM (issue 44); its test block runs in
tests/spark/testing/test_own_pipeline_page.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slipstream.errors import SlipstreamError
from slipstream.testing import PipelineHarness
from tests import doc_blocks

PAGE = "docs/howto/own-pipeline.md"


def page_namespace() -> dict[str, Any]:
    """The page's pipeline module and its test block, run as one module."""
    code = [body for lang, _, body in doc_blocks.blocks(PAGE) if lang == "python"]
    assert len(code) == 2, "the page shows the pipeline module, then its test"
    namespace: dict[str, Any] = {"__name__": "own_pipeline_page"}
    exec(compile("\n".join(code), PAGE, "exec"), namespace)  # noqa: S102 - the page's own code
    return namespace


def no_jvm() -> Any:
    raise AssertionError("the harness asked for a session while binding")


def test_the_pages_pipeline_binds_in_every_mode_it_offers(tmp_path: Path) -> None:
    pipeline = page_namespace()["OrdersPerCustomer"]()
    assert [o.modes for o in pipeline.outputs] == [("update", "complete", "append")]
    for mode in ("update", "complete", "append"):
        harness = PipelineHarness(no_jvm, pipeline, tmp_path / mode, mode=mode, window="10m")
        assert harness.prepared.params["window"].total_seconds() == 600
    with pytest.raises(SlipstreamError) as refused:
        PipelineHarness(no_jvm, pipeline, tmp_path / "bad", window="ten minutes")
    assert refused.value.code == "CONFIG_BAD_VALUE"
