"""Shared fixtures: the bundled test paper indexed once per session with hash embeddings."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEST_PAPER = ROOT / "test_data" / "test_paper.md"
SHARED = ROOT.parent / "shared"
BENCH = SHARED / "bench"

# never reach a model hub from tests
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def paper_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from config import Config
    from indexing.embedder import make_embedder
    from indexing.index_builder import build_index

    out = tmp_path_factory.mktemp("paper") / "index"
    config = Config()
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    return out


@pytest.fixture(scope="session")
def paper_index(paper_index_dir: Path):
    from indexing.index_store import load_index

    return load_index(paper_index_dir)


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None):
    """Run main.py in a fresh process, as a user would."""
    import subprocess

    e = dict(os.environ)
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TREERAG_LLM"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True,
                          text=True, env=e, timeout=timeout, cwd=str(ROOT), input=input)
