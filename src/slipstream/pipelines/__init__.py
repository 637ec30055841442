"""Pipelines: one module per workload, registered in `slipstream.pipelines.registry`.

A pipeline of your own is one module too: subclass `Pipeline`, declare its `Input`s, `Param`s
and `Output`s, write `build` (see examples/orders.py), and run it as `module:Class`. The
shortcuts: a schema as a Spark DDL string, `event_stream` (a JSON stream with an event-time
column), `duration_param`, `choice_param`, `count_param`; and for `build` (in
`slipstream.pipelines.frames`), `watermarked`, `window_bounds`, `not_null` and
`check_windows`."""

from slipstream.pipelines.base import (
    Input,
    Output,
    Param,
    Params,
    Pipeline,
    choice_param,
    count_param,
    duration_param,
    event_stream,
)
from slipstream.pipelines.frames import check_windows, not_null, watermarked, window_bounds
from slipstream.pipelines.registry import get_pipeline, pipelines

__all__ = [
    "Input",
    "Output",
    "Param",
    "Params",
    "Pipeline",
    "check_windows",
    "choice_param",
    "count_param",
    "duration_param",
    "event_stream",
    "get_pipeline",
    "not_null",
    "pipelines",
    "watermarked",
    "window_bounds",
]
