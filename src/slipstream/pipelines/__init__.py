"""Pipelines: one module per workload, registered in `slipstream.pipelines.registry`.

A pipeline of your own is one module too: subclass `Pipeline`, declare its `Input`s, `Param`s
and `Output`s, write `build` (see examples/orders.py), and run it as `module:Class`. The
shortcuts: a schema as a Spark DDL string, `event_stream` (a JSON stream with an event-time
column), `duration_param`, `choice_param`, `count_param`; and for `build` (in
`slipstream.api.frames`), `watermarked`, `window_bounds`, `not_null` and
`check_windows`."""

from slipstream.api import frames
from slipstream.api import pipeline as base
from slipstream.api.frames import *  # noqa: F403 (build's helpers, frames.__all__)
from slipstream.api.pipeline import *  # noqa: F403 (the declarations, base.__all__)
from slipstream.pipelines.registry import get_pipeline, pipelines

__all__ = [*base.__all__, *frames.__all__, "get_pipeline", "pipelines"]
