"""Sources: one module per kind, registered by name in `slipstream.sources.base.SOURCES`."""

from slipstream.sources.base import SOURCES, RawInput, Source, open_source

__all__ = ["SOURCES", "RawInput", "Source", "open_source"]
