"""The session's documented defaults, as pure functions (no Spark)."""

from __future__ import annotations

from slipstream.session import MEMORY, RETENTION, default_driver_memory, streaming_defaults


def test_driver_memory_is_a_quarter_of_ram_within_floor_and_ceiling() -> None:
    assert default_driver_memory(24 * 1024) == "6144m"  # this machine: 24 GiB
    assert default_driver_memory(2 * 1024) == "1024m"  # floor: Spark's own default
    assert default_driver_memory(128 * 1024) == "8192m"  # ceiling


def test_driver_memory_and_retention_apply_where_they_belong() -> None:
    local = streaming_defaults(2, "local[2]")
    cluster = streaming_defaults(None, "spark://127.0.0.1:7077")
    assert local["spark.driver.memory"] == default_driver_memory()
    assert "spark.driver.memory" not in cluster  # the cluster's driver runs no tasks
    for key, value in {**MEMORY, **RETENTION}.items():
        assert local[key] == cluster[key] == value
    assert int(local["spark.sql.ui.retainedExecutions"]) < 1000  # Spark's default
    assert local["spark.buffer.pageSize"] == "4m"  # not 64 MiB per broadcast hash relation
