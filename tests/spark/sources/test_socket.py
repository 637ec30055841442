"""The seeds' quick example: word count over a socket, served by `slipstream feed`'s server."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from slipstream.tools.generators.feed import LineServer

pytestmark = pytest.mark.spark


def test_wordcount_over_socket(spark: SparkSession, tmp_path: Path) -> None:
    lines = ["apache spark structured streaming", "spark  streaming", "Spark"]
    expected = Counter(w for line in lines for w in line.split())
    server = LineServer(0)
    try:
        with PipelineHarness(
            spark,
            "wordcount",
            tmp_path,
            source="socket",
            host="127.0.0.1",
            port=server.port,
            mode="complete",
        ) as h:
            assert server.wait_for_client(timeout=120), "Spark's socket source never connected"
            server.send(lines)
            latest: dict[str, int] = {}
            # The socket reader thread buffers lines asynchronously; drive batches until the
            # complete-mode result holds every word (bounded: no sleeping, no fixed count).
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                rows = h.process()
                if rows:
                    latest = {r["word"]: r["count"] for r in rows}
                if sum(latest.values()) == sum(expected.values()):
                    break
                assert h.run is not None
                h.run.queries["counts"].awaitTermination(0.2)  # bounded poll, not a sync
            assert latest == dict(expected)
    finally:
        server.close()
