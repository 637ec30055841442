"""The Spark line slipstream runs on, read from pyspark's version (no JVM), and what it offers."""

from __future__ import annotations

import pytest

from slipstream.core import spark_line


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("4.2.0", (4, 2)),
        ("4.2.1", (4, 2)),
        ("4.3.0", (4, 3)),
        ("4.3.0.dev1", (4, 3)),
        ("x", (0, 0)),
    ],
)
def test_line_of_a_version(text: str, line: tuple[int, int]) -> None:
    assert spark_line.line(text) == line


def test_each_line_offers_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_line, "version", lambda: "4.2.1")
    assert spark_line.delta() and not spark_line.real_time_state()
    monkeypatch.setattr(spark_line, "version", lambda: "4.3.0")
    assert spark_line.real_time_state() and not spark_line.delta()


def test_the_installed_line_is_a_supported_one() -> None:
    import pyspark

    assert spark_line.version() == pyspark.__version__
    assert spark_line.line() in spark_line.SUPPORTED
