"""In-context demonstrations drawn deterministically from a held-out pool.

For a test item, the candidates are the pool items whose id differs from the test
item's id and whose question text differs (after whitespace/case normalisation) from
the test question, so a test item can never be its own demonstration, even when an
exam holds duplicate questions under different ids. The candidates, sorted by id, are
shuffled with a random generator seeded by sha256(seed, test item id); the first k
are the demonstrations. Hence ICL@1's demonstration is ICL@2's first one, and the
draw does not depend on the order of the pool file or on the other test items.
"""

from __future__ import annotations

import hashlib
import random
from typing import Sequence

from ..errors import IrtexamError
from ..exam.schema import ExamItem


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def item_seed(seed: int, item_id: str) -> int:
    """64-bit seed from sha256(f"{seed}:{item_id}")."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{item_id}".encode("utf-8")).digest()[:8], "big")


def eligible_demonstrations(test: ExamItem, pool: Sequence[ExamItem]) -> list[ExamItem]:
    """Pool items that may serve as demonstrations for ``test`` (never the test item itself)."""
    q = _norm(test.question)
    return sorted((p for p in pool if p.id != test.id and _norm(p.question) != q), key=lambda p: p.id)


def draw_demonstrations(test: ExamItem, pool: Sequence[ExamItem], k: int, *, seed: int = 0) -> list[ExamItem]:
    """The ``k`` demonstrations of ``test``: a seeded permutation prefix of the eligible pool.

    Raises :class:`IrtexamError` when the pool has fewer than ``k`` eligible items.
    """
    if k <= 0:
        return []
    candidates = eligible_demonstrations(test, pool)
    if len(candidates) < k:
        raise IrtexamError(f"ICL@{k} needs {k} demonstrations for item {test.id!r} but the pool holds only "
                           f"{len(candidates)} other items; use a larger 'icl_pool' or smaller 'icl' levels")
    rng = random.Random(item_seed(seed, test.id))
    rng.shuffle(candidates)
    return candidates[:k]
