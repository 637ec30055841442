"""The driver's heap at Spark's floor (issue 45 item 2): a setting under 450 MiB is refused
before the JVM starts, naming the setting and the fix; the JVM's own refusal (a heap the
collector left under the floor) is said with the same code. The floor itself was measured
(settings/driver_memory.py); tests/load/resources.py runs mobile at it."""

from __future__ import annotations

import pytest

from slipstream.errors import SlipstreamError
from slipstream.settings import session
from slipstream.settings.driver_memory import memory_refusal, refuse_small_heap, size_mib

#: what pyspark 4.3's JVM said for spark.driver.memory=450m under the serial collector
JVM_TEXT = (
    "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
    ": org.apache.spark.SparkIllegalArgumentException: [INVALID_DRIVER_MEMORY.SYSTEM_MEMORY] "
    "Insufficient driver memory: System memory 466092032 must be at least 471859200.\n"
    'Please increase heap size using the --driver-memory option or "spark.driver.memory" in '
    "Spark configuration. SQLSTATE: F0000\n\tat org.apache.spark.memory.UnifiedMemoryManager$"
)


def test_spark_sizes_read_as_spark_reads_them() -> None:
    assert size_mib("450m") == size_mib("450M") == size_mib("450mb") == size_mib("450") == 450
    assert size_mib("1g") == 1024 and size_mib("0.5g") == 512 and size_mib("460800k") == 450
    assert size_mib("lots") is None and size_mib("") is None


def test_a_heap_under_sparks_floor_is_refused_naming_the_setting_and_the_fix() -> None:
    for key, value in [("spark.driver.memory", "449m"), ("spark.executor.memory", "0.4g")]:
        with pytest.raises(SlipstreamError) as refused:
            refuse_small_heap({key: value})
        assert refused.value.code == "CONFIG_BAD_VALUE"
        assert f"{key}={value}" in refused.value.message and f"{key}=512m" in refused.value.fix
    refuse_small_heap({"spark.driver.memory": "450m", "spark.executor.memory": "2g"})
    refuse_small_heap({})  # slipstream's own default: a quarter of RAM, at least 1 GiB


def test_the_session_refuses_it_before_a_jvm_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_jvm(*_: object) -> None:
        raise AssertionError("a JVM was started")

    monkeypatch.setattr(session, "launch_jvm", no_jvm)
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")
    with pytest.raises(SlipstreamError) as refused:
        session.build_session("local[2]", {"spark.driver.memory": "400m"})
    assert refused.value.code == "CONFIG_BAD_VALUE"


def test_the_jvms_refusal_is_said_with_the_code_and_the_setting() -> None:
    error = memory_refusal(JVM_TEXT)
    assert error is not None and error.code == "CONFIG_BAD_VALUE"
    assert "gives: [INVALID_DRIVER_MEMORY.SYSTEM_MEMORY] Insufficient" in error.message
    assert "spark.driver.memory" in error.message and "466092032" in error.message
    assert "--conf spark.driver.memory=512m" in error.fix and "\tat " not in error.render()
    executor = memory_refusal("[INVALID_EXECUTOR_MEMORY] Executor memory 1 must be at least 4")
    assert executor is not None and "spark.executor.memory" in executor.message
    assert memory_refusal("java.lang.OutOfMemoryError: Java heap space") is None
