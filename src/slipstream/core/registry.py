"""How slipstream finds what its extension points hold: the modules of the extension point's
folder (`folder_modules`), for sources, sinks and pipelines alike. For sources and sinks, every
class of those modules that subclasses the base and declares its own `kind` (`Registry`):
adding a module adds the class; `Registry.register` adds one defined elsewhere (a test, a
plugin). sources/registry.py and sinks/registry.py each hold one; pipelines/registry.py lists
the same way and imports a pipeline's module when it is asked for."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar, cast

T = TypeVar("T", bound=type)


class Registry(Generic[T]):
    """kind -> class for the modules of `package` (its folder found from the package), listed
    in `order` first and then by kind; `skip` names modules that hold no such class (imported
    only when used). `added` is called once for every class found or registered."""

    def __init__(
        self,
        package: str,
        base: T,
        order: tuple[str, ...] = (),
        skip: frozenset[str] = frozenset(),
        added: Callable[[T], None] | None = None,
    ) -> None:
        self.package = package
        self.base = base
        self.order = order
        self.skip = skip
        self.added = added
        self._found: dict[str, T] | None = None

    def classes(self) -> dict[str, T]:
        """Every class, by kind (the folder is scanned on the first call)."""
        if self._found is None:
            self._found = {}
            for cls in self._scan():
                self._found[vars(cls)["kind"]] = cls
            self._sort()
            for cls in self._found.values():
                if self.added is not None:
                    self.added(cls)
        return dict(self._found)

    def register(self, cls: T) -> T:
        """Add `cls` (a subclass of the base with its own `kind`); usable as a decorator."""
        if not (issubclass(cls, self.base) and "kind" in vars(cls)):
            raise TypeError(f"{cls.__name__} is not a {self.base.__name__} with its own kind")
        self.classes()
        assert self._found is not None
        self._found[vars(cls)["kind"]] = cls
        self._sort()
        if self.added is not None:
            self.added(cls)
        return cls

    def unregister(self, kind: str) -> None:
        """Forget a class added with `register` (a test's, when it ends)."""
        if self._found is not None:
            self._found.pop(kind, None)

    def _sort(self) -> None:
        assert self._found is not None
        rank = {kind: i for i, kind in enumerate(self.order)}
        ordered = sorted(self._found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))
        self._found.clear()
        self._found.update(ordered)

    def _scan(self) -> list[T]:
        found: list[T] = []
        for name in folder_modules(self.package, self.skip):
            module = importlib.import_module(f"{self.package}.{name}")
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if (
                    issubclass(cls, self.base)
                    and cls.__module__ == module.__name__
                    and "kind" in vars(cls)
                    and not inspect.isabstract(cls)
                ):
                    found.append(cast(T, cls))
        return found


def folder_modules(package: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """The modules of an extension point's folder, listed, not imported: every one but those
    in `skip` and the private ones. The registries of sources and sinks import them and keep
    their classes; the pipelines' registry (pipelines/registry.py) names each by its module and
    imports one only when it is asked for, so a broken one is reported, not fatal."""
    folder = Path(importlib.import_module(package).__file__ or "").parent
    return [
        info.name
        for info in pkgutil.iter_modules([str(folder)])
        if info.name not in skip and not info.name.startswith("_")
    ]
