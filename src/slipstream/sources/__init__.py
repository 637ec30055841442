"""Sources: one module per kind, each a `Source` subclass with its own options, found by kind in
`slipstream.sources.registry`."""

from slipstream.sources.base import Binding, RawInput, Source, SourceOptions

__all__ = ["Binding", "RawInput", "Source", "SourceOptions"]
