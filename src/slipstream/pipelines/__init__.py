"""Pipelines: one module per workload, registered in `slipstream.pipelines.registry`."""

from slipstream.pipelines.base import Pipeline
from slipstream.pipelines.registry import get_pipeline, pipelines

__all__ = ["Pipeline", "get_pipeline", "pipelines"]
