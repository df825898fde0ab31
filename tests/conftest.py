"""Shared fixtures: the bundled test paper indexed once per session with hash embeddings."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEST_PAPER = ROOT / "test_data" / "test_paper.md"
SHARED = ROOT.parent / "shared"
BENCH = SHARED / "bench"



def load_benchmark(name: str, folder: str = "benchmarks") -> Any:
    """``<folder>/<name>.py`` (a script of benchmarks/ or tools/local_llm/) as a module, once per
    session: registered (its dataclasses need their module) and imported with its folder on the path
    (a benchmark imports its ``common``)."""
    key = f"_bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    sys.path.insert(0, str(ROOT / folder))
    try:
        spec = importlib.util.spec_from_file_location(key, ROOT / folder / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / folder))


# never reach a model hub from tests
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def paper_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    out = tmp_path_factory.mktemp("paper") / "index"
    config = Config()
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    return out


@pytest.fixture(scope="session")
def paper_index(paper_index_dir: Path):
    from indexing.index_store import load_index

    return load_index(paper_index_dir)


_NO_PROVIDER_ENV = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TREERAG_LLM")


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None,
            fresh_process: bool = False):
    """Run the CLI as a user would: ``main.main(argv)`` in this process (fast: models and imports
    are loaded once per test session) with its own environment, working directory, stdin and
    captured stdout/stderr; ``fresh_process=True`` runs ``python main.py`` in a new process, for
    the smoke tests of what only a new interpreter shows (start-up imports, exit on signals)."""
    import subprocess

    e = dict(os.environ)
    for k in _NO_PROVIDER_ENV:
        e.pop(k, None)
    e.update(env or {})
    if fresh_process:
        return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True,
                              text=True, env=e, timeout=timeout, cwd=str(ROOT), input=input)
    return _run_in_process(list(args), e, input)


def _run_in_process(argv: list[str], env: dict, input: str | None):
    import contextlib
    import io
    import subprocess

    import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(input or "")
    saved_stdin = sys.stdin
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(ROOT)
        sys.stdin = stdin
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main.main(argv)
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["main.py", *argv], code, out.getvalue(), err.getvalue())
