"""Every number a flag takes is bounded, and a value beyond the bound is refused with an error
naming the bound, before Spark starts (issue 13). No Spark."""

from __future__ import annotations

import pytest

from slipstream.app.parser import build_parser
from slipstream.core import values
from slipstream.errors import ConfigError
from slipstream.runtime import runner
from slipstream.settings.config import load_settings
from slipstream.tools.generators import stream_command

TOO_MANY = "1000000001"  # one over values.MAX_COUNT
BOUND = "1,000,000,000"


def refused(call: object) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        call()  # type: ignore[operator]
    assert raised.value.code == "CONFIG_BAD_VALUE"
    return raised.value


@pytest.mark.parametrize("setting", ["rows_per_second", "max_files_per_trigger"])
def test_run_settings_name_their_bounds(setting: str) -> None:
    assert load_settings("mobile", {setting: "1000000000"}, environ={})
    for bad in (TOO_MANY, "0", "inf", "nan", "1e30", "2.5"):
        error = refused(lambda bad=bad: load_settings("mobile", {setting: bad}, environ={}))
        assert BOUND in error.render(), error.render()


@pytest.mark.parametrize("setting", ["port", "metrics_port"])
def test_ports_name_their_bounds(setting: str) -> None:
    assert load_settings("mobile", {setting: "65535"}, environ={})
    for bad in ("65536", "-1", "1e9"):
        error = refused(lambda bad=bad: load_settings("mobile", {setting: bad}, environ={}))
        assert "65,535" in error.render()


@pytest.mark.parametrize(
    ("pipeline", "param", "bad"),
    [("activity", "burst", TOO_MANY), ("activity", "burst", "0"),
     ("sensors", "max_per_minute", "1e10"), ("sensors", "max_per_minute", "inf"),
     ("sensors", "max_per_minute", "0")],
)  # fmt: skip
def test_pipeline_numbers_name_their_bounds(pipeline: str, param: str, bad: str) -> None:
    settings = load_settings(pipeline, {}, environ={}, params={param: bad})
    error = refused(lambda: runner.prepare(settings, check_source=False))
    assert BOUND in error.render(), error.render()


@pytest.mark.parametrize(
    ("argv", "bound"),
    [(["stop", "mobile", "--timeout", "1e9"], "86,400"), (["stop", "mobile", "--timeout", "0"],
     "86,400"), (["feed", "--port", "70000"], "65,535"), (["dashboard", "--port", "-1"], "65,535"),
     (["demo", "--rate", "inf"], BOUND)],
)  # fmt: skip
def test_command_flags_name_their_bounds(
    argv: list[str], bound: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert bound in capsys.readouterr().err


def test_generator_numbers_name_their_bounds() -> None:
    assert stream_command.number("rate", "1000000000", float, 1.0) == 1e9
    assert stream_command.number("seed", str(2**63 - 1), int, 1) == 2**63 - 1
    for name, text, kind in (
        ("rate", "1e12", float), ("rate", "inf", float), ("rate", "nan", float),
        ("users", TOO_MANY, int), ("seed", str(2**63), int),
    ):  # fmt: skip
        error = refused(
            lambda name=name, text=text, kind=kind: stream_command.number(name, text, kind, 0)
        )
        top = f"{2**63 - 1:,}" if name == "seed" else BOUND
        assert f"--{name}" in error.render() and top in error.render(), error.render()


def test_durations_and_windows_name_their_bounds() -> None:
    """The issue's own examples: a duration of 99999999999 days, a window of 0.4 ms."""
    error = refused(lambda: load_settings("mobile", {"duration": "99999999999d"}, environ={}))
    assert "3650 days" in error.render()
    settings = load_settings("mobile", {}, environ={}, params={"window": "0.4ms"})
    error = refused(lambda: runner.prepare(settings, check_source=False))
    assert "whole number of milliseconds" in error.render()
    with pytest.raises(ValueError, match="from 1 to 1,000,000,000"):
        values.positive_int(10**12)
