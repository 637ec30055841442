"""Event generators: one module per workload, plus the atomic file writer they share."""

from slipstream.core.files import write_atomically
from slipstream.tools.generators.trending import (
    Clock,
    GenerationReport,
    SpecError,
    SystemClock,
    TrendingSpec,
    generate,
    write_catalog,
)

__all__ = [
    "Clock",
    "GenerationReport",
    "SpecError",
    "SystemClock",
    "TrendingSpec",
    "generate",
    "write_atomically",
    "write_catalog",
]
