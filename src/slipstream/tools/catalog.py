"""The tools each built-in pipeline has, found by the pipeline's name: its demo (`slipstream
demo NAME`) and its event generator (`slipstream generate NAME`). A pipeline never names its
tools; a tool names the pipeline it serves, here. Modules load only when asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: pipeline name -> `module:function` of its demo, called as
#: `function(state_dir, out, duration=..., rate=...)` (the keywords it accepts)
DEMOS: dict[str, str] = {
    "mobile": "slipstream.tools.demo:demo",
    "trending": "slipstream.tools.demo_trending:demo",
}

#: pipeline name -> module of its generator: `add_arguments(parser)` adds the generator's flags,
#: `run(args, out)` writes. `generate` also takes the module's own name (`generate iot`).
GENERATORS: dict[str, str] = {
    "activity": "slipstream.tools.generators.activity",
    "ads": "slipstream.tools.generators.ads",
    "iot_steps": "slipstream.tools.generators.iot",
    "mobile": "slipstream.tools.generators.mobile",
    "sensors": "slipstream.tools.generators.sensors",
    "temperature_load": "slipstream.tools.generators.temperature_load",
    "trending": "slipstream.tools.generators.command",
    "wordcount": "slipstream.tools.generators.words",
}


def demo(pipeline: str) -> Callable[..., Any] | None:
    """The demo function of a pipeline, or None."""
    target = DEMOS.get(pipeline)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def generator(pipeline: str) -> ModuleType | None:
    """The generator module of a pipeline, or None."""
    module = GENERATORS.get(pipeline)
    return None if module is None else importlib.import_module(module)


def generator_names() -> list[str]:
    """What `generate NAME` takes: each pipeline with a generator, then each generator module
    whose name is not its pipeline's (`iot`)."""
    modules = [m.rsplit(".", 1)[-1] for m in GENERATORS.values()]
    return sorted(GENERATORS) + [m for m in modules if m not in GENERATORS]


def pipeline_of_generator(name: str) -> str | None:
    """The pipeline whose generator module is called `name` (`iot` -> iot_steps), or None."""
    for pipeline, module in GENERATORS.items():
        if module.rsplit(".", 1)[-1] == name:
            return pipeline
    return None
