"""The smaller sharp edges a new user hit: scoping a query to a document, --top-k beyond what the
index holds, --no-log run ids, a text file named .pdf, HTML comments in passages, `tree --json`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import TEST_PAPER, run_cli

Q = "What is AdaRouter's accuracy on EUR/USD?"


@pytest.fixture(scope="module")
def two_doc_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("two")
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    shutil.copy(TEST_PAPER, docs / "paper.md")
    (docs / "sub" / "notes.md").write_text(
        "# Travel notes\n\n## Budget\n\nThe travel budget is 300 euros per person and covers accuracy checks.\n",
        encoding="utf-8")
    out = root / "index"
    proc = run_cli("index", "--input", str(docs), "--output", str(out), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out


def _docs_of(stdout: str) -> set[str]:
    return {h["doc_path"] for h in json.loads(stdout)["step2_retrieved"]}


def test_query_doc_scopes_to_named_documents(two_doc_index: Path, tmp_path: Path) -> None:
    base = ["query", "--index", str(two_doc_index), "--query", Q, "--json", "--no-log", "--mock"]
    assert "paper.md" in _docs_of(run_cli(*base).stdout)
    proc = run_cli(*base, "--doc", "sub/notes.md")
    assert proc.returncode == 0, proc.stderr
    assert _docs_of(proc.stdout) == {"sub/notes.md"}
    # a path to the file that ends in the index's name, and repeated --doc
    proc = run_cli(*base, "--doc", str(tmp_path / "docs" / "sub" / "notes.md"), "--doc", "paper.md")
    assert proc.returncode == 0 and _docs_of(proc.stdout) <= {"sub/notes.md", "paper.md"}
    bad = run_cli(*base, "--doc", "nope.md")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1
    assert "--doc 'nope.md' is not a document of the index" in bad.stderr and "paper.md" in bad.stderr


def test_top_k_beyond_the_index_is_said(paper_index_dir: Path) -> None:
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--top-k", "100000", "--no-log", "--mock",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    got = len(json.loads(proc.stdout)["step2_retrieved"])
    assert f"--top-k 100,000 is more than the" in proc.stderr and f"{got} returned" in proc.stderr
    quiet = run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--top-k", "2", "--no-log", "--mock")
    assert "note:" not in quiet.stderr


def test_no_log_prints_no_run_id(paper_index_dir: Path, tmp_path: Path) -> None:
    env = {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "c")}
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--no-log", "--mock", env=env)
    assert proc.returncode == 0 and "| not logged]" in proc.stdout and "| run " not in proc.stdout
    assert json.loads(run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--no-log", "--mock",
                              "--json", env=env).stdout)["logged"] is False
    logged = run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--mock", env=env)
    assert "| run " in logged.stdout
    # a log that cannot be written: the run was not recorded, so no id is printed either
    blocker = tmp_path / "file"
    blocker.write_text("x")
    broken = run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--mock",
                     env={**env, "TREERAG_LOG": str(blocker / "runs.sqlite3")})
    assert broken.returncode == 0 and "| not logged]" in broken.stdout


def test_text_file_named_pdf_is_skipped_with_a_warning(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(TEST_PAPER, docs / "paper.md")
    (docs / "fake.pdf").write_text("# Not a PDF\n\nJust text someone renamed.\n", encoding="utf-8")
    proc = run_cli("index", "--input", str(docs), "--output", str(tmp_path / "idx"), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "warning: skipped fake.pdf: named .pdf but not a PDF" in proc.stderr
    assert proc.stdout.startswith("indexed 1 document(s)")
    alone = run_cli("index", "--input", str(docs / "fake.pdf"), "--output", str(tmp_path / "idx2"), "--mock")
    assert alone.returncode != 0 and alone.stderr.startswith("error: ") and "not a PDF" in alone.stderr
    assert "Traceback" not in alone.stderr


def test_tree_speaks_the_documents_language_and_names_files(tmp_path: Path) -> None:
    proc = run_cli("tree", "--input", str(TEST_PAPER))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Document structure:" and "File: test_paper.md" in lines
    assert "[0001] Abstract (leaf)" in lines and "摘要" not in proc.stdout and "叶子节点" not in proc.stdout
    zh = tmp_path / "law.md"
    zh.write_text("# 合同法\n\n## 第一章 一般规定\n\n第一条 为了保护合同当事人的合法权益，制定本法。\n", encoding="utf-8")
    proc = run_cli("tree", "--input", str(zh))
    assert proc.stdout.startswith("文档结构:") and "文件: law.md" in proc.stdout and "(叶子节点)" in proc.stdout


def test_tree_json(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(TEST_PAPER, docs / "paper.md")
    (docs / "notes.md").write_text("# Notes\n\n## Budget\n\nThe travel budget is 300 euros.\n", encoding="utf-8")
    proc = run_cli("tree", "--input", str(docs), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {d["path"] for d in data["documents"]} == {"paper.md", "notes.md"}

    def walk(nodes: list) -> list:
        return [n for node in nodes for n in [node, *walk(node["children"])]]

    every = walk(data["nodes"])
    assert {n["doc_path"] for n in every} == {"paper.md", "notes.md"}
    leaf = next(n for n in every if n["heading"] == "Budget")
    assert leaf["leaf"] and leaf["children"] == [] and leaf["heading_path"].endswith("Budget")
    assert leaf["lines"][0] >= 1
