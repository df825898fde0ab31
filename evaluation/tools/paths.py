"""Where the tools find the shared evaluation sets and put what they write: the same places as
benchmarks/common.py, so a set or an index built by one is found by the other. (A copy, not an import
of either from the other: a benchmark that runs another checkout's code in a worker must not have
imported this checkout's ``evaluation`` package first.)"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH_DATA = Path(os.environ.get("TREERAG_BENCH", ROOT.parent / "shared" / "bench"))
"""The evaluation sets (``$TREERAG_BENCH``, by default the checkout's sibling shared/bench)."""
RESULTS_DIR = ROOT / "benchmarks" / "out"
"""Results (git-ignored)."""


def default_workdir() -> Path:
    """Where indexes and generated corpora go (big, reusable between runs, never in the repo)."""
    return Path(os.environ.get("TREERAG_BENCH_WORK", Path(tempfile.gettempdir()) / "treerag-bench"))
