"""MkDocs hook: the docstrings use Sphinx cross-reference roles (``:func:`irtexam.fit```), which
mkdocstrings renders as literal text before the code span; drop the role so only the name shows,
and shorten ``~a.b.C`` to ``C`` as Sphinx does."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:meth|func|class|mod|data|attr|exc|obj|const):(?=<code)")
SHORTENED = re.compile(r"<code>~(?:[\w]+\.)*([\w]+)</code>")


def on_page_content(html: str, **kwargs) -> str:
    """Remove ``:role:`` prefixes in front of code spans, and show ``~a.b.C`` as ``C``."""
    return SHORTENED.sub(r"<code>\1</code>", ROLE.sub("", html))
