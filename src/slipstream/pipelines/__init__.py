"""Pipelines: one module per workload, registered in `slipstream.pipelines.registry`.

A pipeline of your own is one module too: subclass `Pipeline`, declare its `Input`s, `Param`s
and `Output`s, write `build` (see examples/orders.py), and run it as `module:Class`."""

from slipstream.pipelines.base import Input, Output, Param, Params, Pipeline
from slipstream.pipelines.registry import get_pipeline, pipelines

__all__ = ["Input", "Output", "Param", "Params", "Pipeline", "get_pipeline", "pipelines"]
