"""Which Spark line slipstream runs on, read from the installed pyspark before any JVM starts,
and what each line offers: the one place that says so.

slipstream supports two lines (`pyspark>=4.2,<4.4`), chosen by what the user installs:

- **4.3** (`pip install slipstream`): real-time mode's stateful operators (`dropDuplicates`,
  aggregations), which slipstream's real-time outputs use.
- **4.2** (`pip install 'slipstream[delta]'`: `delta-spark` 4.4 requires `pyspark<=4.2.0`):
  Delta Lake. Delta's jar for Spark 4.2 fails on 4.3 (`NoSuchMethodError` at the first read),
  and Maven Central serves no Delta built for 4.3 (checked November 2026).

A feature the running line lacks is refused before start with its own code, naming the line it
needs and what to install (REAL_TIME_STATE_UNSUPPORTED, DELTA_UNAVAILABLE)."""

from __future__ import annotations

import re

from slipstream.errors import ConfigError

#: the first line whose real-time mode runs stateful operators (Spark 4.3.0's release)
REAL_TIME_STATE_LINE = (4, 3)
#: the line Delta Lake's newest jar (io.delta:delta-spark_2.13:4.4.x) is built for
DELTA_LINE = (4, 2)
#: the lines slipstream supports (pyproject's `pyspark>=4.2,<4.4`)
SUPPORTED = ((4, 2), (4, 3))


def version() -> str:
    """The installed pyspark's version (`pyspark.__version__`: no JVM)."""
    import pyspark

    return str(pyspark.__version__)


def line(text: str | None = None) -> tuple[int, int]:
    """The (major, minor) line of `text`, or of the installed pyspark: 4.2.1 -> (4, 2)."""
    found = re.match(r"(\d+)\.(\d+)", text if text is not None else version())
    if found is None:
        return (0, 0)
    return int(found.group(1)), int(found.group(2))


def named(at: tuple[int, int]) -> str:
    return f"{at[0]}.{at[1]}"


def real_time_state() -> bool:
    """Whether real-time mode runs stateful operators on the running line."""
    return line() >= REAL_TIME_STATE_LINE


def delta() -> bool:
    """Whether Delta Lake's jar runs on the running line."""
    return line() == DELTA_LINE


def require_delta() -> None:
    """DELTA_UNAVAILABLE unless the running line is Delta's: called where a Delta input or
    output is declared, before the JVM starts."""
    if delta():
        return
    needed = named(DELTA_LINE)
    raise ConfigError(
        "DELTA_UNAVAILABLE",
        f"Delta Lake's jar (io.delta:delta-spark_2.13:4.4) is built for Spark {needed} and "
        f"fails on the installed pyspark {version()}",
        "install slipstream[delta] in an environment of its own (pip install "
        f"'slipstream[delta]'): it brings delta-spark and pyspark {needed} "
        "(in this repository: make venv-delta)",
    )
