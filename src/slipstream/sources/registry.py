"""The sources slipstream knows, by kind: every `Source` subclass defined in a module of this
folder (listed with pkgutil and imported here; adding a module adds the source). Their options
reach the run's settings (settings/options.py) from here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache
from pathlib import Path

from slipstream.core.options import Option
from slipstream.errors import ConfigError
from slipstream.sources.base import Source

NOT_SOURCES = frozenset({"base", "registry", "parquet_files"})
#: the order `--help` and messages list them in (any other kind follows, by name)
ORDER = ("files", "socket", "rate", "table", "kafka")


@cache
def sources() -> dict[str, type[Source]]:
    """kind -> Source class, for every source module of this package."""
    found: dict[str, type[Source]] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name in NOT_SOURCES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Source)
                and cls.__module__ == module.__name__
                and not inspect.isabstract(cls)
            ):
                found[cls.kind] = cls
    rank = {kind: i for i, kind in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def get_source(kind: str) -> Source:
    known = sources()
    if kind not in known:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"unknown source {kind!r}",
            f"use one of {', '.join(known)}",
        )
    return known[kind]()


def source_options() -> tuple[Option, ...]:
    """Every source's own options, each name once (two sources may share one, such as a port)."""
    seen: dict[str, Option] = {}
    for cls in sources().values():
        for option in cls.options:
            seen.setdefault(option.name, option)
    return tuple(seen.values())


SOURCE_KINDS: tuple[str, ...] = tuple(sources())
