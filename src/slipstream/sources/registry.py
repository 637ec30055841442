"""The sources slipstream knows, by kind: every `Source` subclass with its own `kind` in a module
of this folder (core/registry.py; adding a module adds the source), and any added with
`register`. Their options reach the run's settings (settings/options.py) from here."""

from __future__ import annotations

from slipstream.core.options import Option
from slipstream.core.registry import Registry
from slipstream.errors import ConfigError
from slipstream.sources.base import Source

#: the order `--help` and messages list them in (any other kind follows, by name)
ORDER = ("files", "socket", "rate", "table", "kafka", "format", "delta")
REGISTRY: Registry[type[Source]] = Registry(
    __package__ or "slipstream.sources",
    Source,  # type: ignore[type-abstract]  # the base, abstract: its subclasses register
    ORDER,
    skip=frozenset({"base", "registry", "parquet_files"}),
)


def sources() -> dict[str, type[Source]]:
    """kind -> Source class, for every source module of this package and every registered."""
    return REGISTRY.classes()


def register(cls: type[Source]) -> type[Source]:
    """Add a Source subclass defined outside this folder (a test's); usable as a decorator."""
    return REGISTRY.register(cls)


def unregister(kind: str) -> None:
    REGISTRY.unregister(kind)


def source_class(kind: str) -> type[Source]:
    known = sources()
    if kind not in known:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"unknown source {kind!r}",
            f"use one of {', '.join(known)}",
        )
    return known[kind]


def get_source(kind: str) -> Source:
    return source_class(kind)()


def kinds_that(capable: str) -> tuple[str, ...]:
    """The kinds whose class has the capability `capable` (a boolean class attribute)."""
    return tuple(kind for kind, cls in sources().items() if getattr(cls, capable))


def source_options() -> tuple[Option, ...]:
    """Every source's own options, each name once (two sources may share one, such as a port)."""
    seen: dict[str, Option] = {}
    for cls in sources().values():
        for option in cls.options:
            seen.setdefault(option.name, option)
    return tuple(seen.values())
