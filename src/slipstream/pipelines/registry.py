"""The pipelines slipstream knows, by name. User pipelines load from `module:attr`."""

from __future__ import annotations

import importlib

from slipstream.errors import ConfigError
from slipstream.pipelines.base import Pipeline


def pipelines() -> dict[str, Pipeline]:
    from slipstream.pipelines.mobile import MobilePipeline
    from slipstream.pipelines.wordcount import WordCountPipeline

    found: list[Pipeline] = [WordCountPipeline(), MobilePipeline()]
    try:
        from slipstream.pipelines.trending import TrendingPipeline  # type: ignore[import-not-found]

        found.append(TrendingPipeline())
    except ImportError:
        pass
    return {p.name: p for p in found}


def get_pipeline(name: str) -> Pipeline:
    """A registered pipeline, or a user's `package.module:attr` (a Pipeline class or instance)."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(
                "UNKNOWN_PIPELINE",
                f"cannot load pipeline {name!r}: {exc}",
                "give module:attr of a slipstream Pipeline on PYTHONPATH",
            ) from None
        pipeline = obj() if isinstance(obj, type) else obj
        if not isinstance(pipeline, Pipeline):
            raise ConfigError(
                "UNKNOWN_PIPELINE",
                f"{name!r} is not a slipstream Pipeline",
                "subclass slipstream.pipelines.Pipeline",
            )
        return pipeline
    known = pipelines()
    if name not in known:
        raise ConfigError(
            "UNKNOWN_PIPELINE",
            f"no pipeline named {name!r}",
            f"use one of {', '.join(sorted(known))} (see `slipstream list`)",
        )
    return known[name]
