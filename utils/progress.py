"""Progress bars on stderr for long steps (embedding, summaries, evaluation)."""
from __future__ import annotations

import sys
from typing import Callable

ProgressFactory = Callable[[int, str], Callable[[int], None]]


def tqdm_progress(enabled: bool, unit: str = "chunk") -> ProgressFactory | None:
    """(total, description) -> advance(n); None when disabled. tqdm is imported only when a bar starts."""
    if not enabled:
        return None

    def factory(total: int, desc: str) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, disable=None,
                   dynamic_ncols=True)

        def advance(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return advance

    return factory
