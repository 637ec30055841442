"""The smallest heap Spark runs with: judged from the settings before the JVM starts, and the
JVM's own refusal said with a code when the settings could not tell.

Spark's memory manager (UnifiedMemoryManager) reserves 300 MiB of the heap and refuses a JVM
whose heap (`Runtime.maxMemory`) is under 1.5 times that, 450 MiB = 471859200 bytes:
`[INVALID_DRIVER_MEMORY.SYSTEM_MEMORY] ... System memory N must be at least 471859200` (and
INVALID_EXECUTOR_MEMORY for `spark.executor.memory` under it). What `-Xmx` gives as
`maxMemory` depends on the collector. Measured on Java 17 with pyspark 4.3 (2026-11-29):
`spark.driver.memory=450m` starts under the JVM's default collector (G1, whose maxMemory is the
whole heap) and is refused under the serial one (it holds a survivor space back: 450m gave
466 MiB short of the floor, 470m was accepted); 440m is refused under both. So a setting under
450 MiB is refused here, before the JVM; one between 450 and about 470 MiB depends on the
collector, and the JVM's refusal says so."""

from __future__ import annotations

import re
from collections.abc import Mapping

from slipstream.errors import ConfigError, said

#: Spark's floor on the heap (1.5 x its 300 MiB reserve), in MiB
SPARK_MINIMUM_MIB = 450
#: what the fix suggests: above the floor whatever the collector
SUGGESTED = "512m"
#: the settings Spark's memory manager judges against the floor
HEAP_SETTINGS = ("spark.driver.memory", "spark.executor.memory")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)i?b?\s*$", re.IGNORECASE)
_POWER = {"k": -1, "m": 0, "": 0, "g": 1, "t": 2, "p": 3}
_REFUSED = re.compile(r"\[INVALID_(DRIVER|EXECUTOR)_MEMORY[.\w]*\]")


def size_mib(text: str) -> float | None:
    """A Spark memory setting in MiB: `450m`, `1g`, `512mb`, `2048` (no unit: MiB, as Spark
    reads `spark.driver.memory`); None when Spark would not read it as a size either."""
    match = _SIZE.match(text)
    if match is None:
        return None
    return float(match.group(1)) * 1024.0 ** _POWER[match.group(2).lower()]


def refuse_small_heap(settings: Mapping[str, str]) -> None:
    """ConfigError CONFIG_BAD_VALUE when a heap setting is under Spark's floor: the JVM would
    start, then Spark would refuse it some seconds later."""
    for key in HEAP_SETTINGS:
        value = settings.get(key)
        mib = size_mib(value) if value is not None else None
        if mib is not None and mib < SPARK_MINIMUM_MIB:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--conf {key}={value} is under the {SPARK_MINIMUM_MIB} MiB Spark needs at least "
                "(it keeps 300 MiB of the heap for itself)",
                f"give --conf {key}={SUGGESTED} or more, or leave it out: a local run takes a "
                "quarter of the machine's memory",
            )


def memory_refusal(text: str) -> ConfigError | None:
    """Spark's refusal of a heap under its floor (the JVM's text, `INVALID_DRIVER_MEMORY`) as a
    ConfigError naming the setting; None when `text` says something else."""
    match = _REFUSED.search(text or "")
    if match is None:
        return None
    key = f"spark.{match.group(1).lower()}.memory"
    return ConfigError(
        "CONFIG_BAD_VALUE",
        f"Spark refused the heap {key} gives: {said(text, match.start())}",
        f"give --conf {key}={SUGGESTED} or more: Spark needs a heap of at least "
        f"{SPARK_MINIMUM_MIB} MiB after the garbage collector's own share, which depends on the "
        "collector (the serial one keeps more)",
    )
