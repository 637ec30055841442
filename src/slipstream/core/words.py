"""Counts in words: `1 batch`, `2 batches`, `1,000 rows`."""

from __future__ import annotations


def plural(word: str) -> str:
    """The plural of a word slipstream counts (batch -> batches, query -> queries)."""
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return word[:-1] + "ies"
    return word + "s"


def count(n: int, word: str, many: str | None = None) -> str:
    """`n word`, the word in the plural unless n is 1 (`many` when it is irregular)."""
    return f"{n:,} {word if n == 1 else many or plural(word)}"
