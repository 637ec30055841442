"""Sources: one module per kind, registered by name in `slipstream.sources.base.SOURCES`."""

from slipstream.sources.base import SOURCES, Binding, RawInput, Source

__all__ = ["SOURCES", "Binding", "RawInput", "Source"]
