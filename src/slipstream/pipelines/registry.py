"""The pipelines slipstream knows, by name.

- Built-ins: one module each under `slipstream.pipelines`, named after the pipeline and
  defining one Pipeline subclass (adding a module adds the pipeline: nothing else to edit).
- Installed packages: the entry-point group `slipstream.pipelines` (`name = "pkg.mod:Class"`
  in the package's `[project.entry-points."slipstream.pipelines"]`).
- Anything else: `package.module:attr` given where a pipeline name goes.

A module that fails to import is reported with its own error wherever its name is asked for
(and by `slipstream list`); it never turns into "no pipeline named ..."."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from slipstream.api.pipeline import Pipeline, check_declaration
from slipstream.core.registry import folder_modules
from slipstream.errors import ConfigError

ENTRY_POINT_GROUP = "slipstream.pipelines"
NOT_PIPELINES = frozenset({"base", "frames", "registry", "schema"})


def builtin() -> dict[str, str]:
    """name -> module of the built-in pipelines: the modules of this package (listed, not
    imported; core/registry.py, as sources and sinks are found)."""
    package = __package__ or "slipstream.pipelines"
    return {name: f"{package}.{name}" for name in folder_modules(package, NOT_PIPELINES)}


@dataclass(frozen=True)
class Broken:
    """A registered pipeline whose code cannot be loaded, and why."""

    name: str
    target: str
    error: str


def load(target: str, name: str | None = None) -> Pipeline:
    """A Pipeline from `module:attr` (a Pipeline class or instance); ConfigError naming the
    target and the real cause when it cannot be loaded."""
    module_name, _, attr = target.partition(":")
    label = f"pipeline {name!r} ({target})" if name else f"pipeline {target!r}"
    if name is None and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # `slipstream run examples.orders:Orders` from the checkout
    try:
        module = importlib.import_module(module_name)
        obj: Any = getattr(module, attr) if attr else _the_pipeline_of(module)
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the module's own
        raise ConfigError(
            "UNKNOWN_PIPELINE",
            f"cannot load {label}: {type(exc).__name__}: {exc}",
            "fix the module's error, or give module:attr of a slipstream Pipeline on PYTHONPATH",
        ) from exc
    pipeline = obj() if isinstance(obj, type) else obj
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(
            "UNKNOWN_PIPELINE",
            f"{label} is not a slipstream Pipeline",
            "subclass slipstream.pipelines.Pipeline",
        )
    check_declaration(pipeline)
    return pipeline


def _the_pipeline_of(module: Any) -> type[Pipeline]:
    """The one concrete Pipeline subclass a built-in module defines."""
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Pipeline)
        and value.__module__ == module.__name__
        and not inspect.isabstract(value)
    ]
    if len(found) != 1:
        raise LookupError(f"{module.__name__} defines {len(found)} Pipeline subclasses, not one")
    return found[0]


def registered() -> dict[str, str]:
    """Every registered name and its `module[:attr]`: built-ins, then installed entry points."""
    found = builtin()
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, point.value)
    return found


def discover() -> tuple[dict[str, Pipeline], list[Broken]]:
    """The pipelines that load, and those that do not (with their errors)."""
    loaded: dict[str, Pipeline] = {}
    broken: list[Broken] = []
    for name, target in registered().items():
        try:
            loaded[name] = load(target, name)
        except ConfigError as exc:
            broken.append(Broken(name, target, exc.message))
    return loaded, broken


def pipelines() -> dict[str, Pipeline]:
    """The registered pipelines that load, by name."""
    return discover()[0]


def get_pipeline(name: str) -> Pipeline:
    """A registered pipeline, or a user's `package.module:attr` (a Pipeline class or instance)."""
    if ":" in name:
        return load(name)
    return registered_pipeline(name)


def registered_pipeline(name: str) -> Pipeline:
    """A registered pipeline only: for names read from files (the dashboard reads them from the
    event logs of a state dir), which must never choose a module to import."""
    known = registered()
    if name not in known:
        raise ConfigError(
            "UNKNOWN_PIPELINE",
            f"no pipeline named {name!r}",
            f"use one of {', '.join(sorted(known))} (see `slipstream list`)",
        )
    return load(known[name], name)
