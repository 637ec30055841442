"""The README's and the documentation pages' code blocks, as the tests that run them read them."""

from __future__ import annotations

import re

from tests.helpers import REPO

DOCS = REPO / "docs"


def text_of(page: str) -> str:
    """A page by its path from the repository root: `README.md`, `docs/tutorial.md`."""
    return (REPO / page).read_text()


def section(page: str, heading: str) -> str:
    """The text under `heading` (a whole heading line) up to the next heading of its level."""
    level = len(heading) - len(heading.lstrip("#"))
    text = text_of(page).split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n#{{1,{level}}} ", text, maxsplit=1)[0]


def block_after(page: str, heading: str, lang: str) -> str:
    """The first ```lang block under `heading`."""
    match = re.search(rf"```{lang}\n(.*?)```", section(page, heading), re.S)
    assert match, f"no {lang} block after {heading} in {page}"
    return match.group(1)


#: ```lang title="PATH"``` (a file the reader writes) or ```sh (commands the reader types)
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```', re.S | re.M)


def blocks(page: str) -> list[tuple[str, str | None, str]]:
    """(lang, title or None, body) of every fenced block of a page, in order."""
    return [(lang, title or None, body) for lang, title, body in BLOCK.findall(text_of(page))]
