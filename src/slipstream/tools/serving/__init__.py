"""The read side: queries over the serving tables the sinks fill (terminal views, dashboard)."""

from slipstream.tools.serving.trending import top_articles

__all__ = ["top_articles"]
