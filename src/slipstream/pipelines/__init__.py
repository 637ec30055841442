"""Pipelines: one module per built-in workload, found by name in `slipstream.pipelines.registry`.

A pipeline of your own is one module too: subclass `Pipeline`, declare its `Input`s, `Param`s
and `Output`s, write `build` (see examples/orders.py), and run it as `module:Class`. Everything
a pipeline module needs comes from `slipstream.api`, and this package offers the same names:
the declarations, the shortcuts (`event_stream`, `duration_param`, `choice_param`,
`count_param`), build's helpers (`watermarked`, `window_bounds`, `not_null`, `check_windows`,
`spark_interval`), schemas (`parse_ddl`) and `Expectation`."""

from slipstream import api
from slipstream.api import *  # noqa: F403 (the author's API, api.__all__)
from slipstream.pipelines.registry import get_pipeline, pipelines

__all__ = [*api.__all__, "get_pipeline", "pipelines"]
