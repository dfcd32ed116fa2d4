"""MkDocs hook: the docstrings use Sphinx cross-reference roles (``:func:`irtexam.fit```), which
mkdocstrings renders as literal text before the code span; drop the role so only the name shows."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:meth|func|class|mod|data|attr|exc|obj|const):(?=<code)")


def on_page_content(html: str, **kwargs) -> str:
    """Remove ``:role:`` prefixes in front of code spans in the rendered page."""
    return ROLE.sub("", html)
