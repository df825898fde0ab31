"""`index` and `tree` from the command line: happy path and every bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TEST_PAPER, run_cli


def _assert_one_line_error(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]


def test_index_test_paper(tmp_path: Path) -> None:
    proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx"), "--mock",
                   fresh_process=True)  # smoke test: a new interpreter
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("indexed 1 document(s)")
    assert "chunks/s" in proc.stdout
    meta = json.loads((tmp_path / "idx" / "metadata.json").read_text())
    assert meta["counts"]["leaves"] == 12


def test_tree_prints_spec_format() -> None:
    proc = run_cli("tree", "--input", str(TEST_PAPER), "--locator-view")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "文档结构:"
    assert lines[2] == "[0001] Abstract (叶子节点)"
    assert lines[3].startswith("  摘要: ")
    assert "[0002] 1 Introduction" in lines
    assert "  [0003] 1.1 Background (叶子节点)" in lines
    assert "    [0009] 3.2.1 Encoder Design (叶子节点)" in lines


@pytest.mark.parametrize("case", ["missing", "empty_folder", "empty_file", "binary", "unwritable"])
def test_index_bad_input(tmp_path: Path, case: str) -> None:
    out = tmp_path / "idx"
    if case == "missing":
        src, needle = tmp_path / "nope.md", "nope.md"
    elif case == "empty_folder":
        src = tmp_path / "folder"
        src.mkdir()
        (src / "logo.png").write_bytes(b"\x89PNG")
        needle = "no supported documents"
    elif case == "empty_file":
        src = tmp_path / "empty.md"
        src.write_text("  \n\n \t\n")
        needle = "empty"
    elif case == "binary":
        src = tmp_path / "image.md"
        src.write_bytes(bytes(range(256)) * 8)
        needle = "binary"
    else:
        src = TEST_PAPER
        blocker = tmp_path / "file"
        blocker.write_text("x")
        out = blocker / "idx"  # parent is a file: cannot be created
        needle = "output"
    proc = run_cli("index", "--input", str(src), "--output", str(out), "--mock", "--quiet")
    _assert_one_line_error(proc, needle)
    assert not (tmp_path / "idx").exists()


def test_gb18030_document_is_indexed(tmp_path: Path) -> None:
    src = tmp_path / "law.md"
    src.write_bytes("# 第一章 总则\n\n第一条 为了保护民事主体的合法权益，制定本法。\n".encode("gb18030"))
    proc = run_cli("index", "--input", str(src), "--output", str(tmp_path / "idx"), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    chunks = (tmp_path / "idx" / "chunks.jsonl").read_text(encoding="utf-8")
    assert "民事主体" in chunks


def test_folder_skips_empty_documents_with_warning(tmp_path: Path) -> None:
    src = tmp_path / "docs"
    (src / "sub").mkdir(parents=True)
    (src / "a.md").write_text("# A\n\nAlpha text about routers and venues.\n")
    (src / "sub" / "b.markdown").write_text("# B\n\nBeta text about encoders and ticks.\n")
    (src / "empty.md").write_text("\n\n")
    proc = run_cli("index", "--input", str(src), "--output", str(tmp_path / "idx"), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "warning" in proc.stderr and "empty.md" in proc.stderr
    meta = json.loads((tmp_path / "idx" / "metadata.json").read_text())
    assert [d["path"] for d in meta["documents"]] == ["a.md", "sub/b.markdown"]


def test_help_imports_no_model_library() -> None:
    code = ("import sys, main; main.build_parser().format_help(); "
            "heavy = [m for m in ('torch', 'sentence_transformers', 'onnxruntime', 'jieba', 'openai', "
            "'anthropic', 'numpy') if m in sys.modules]; print(heavy)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_rebuild_never_deletes_files_treerag_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    assert run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock").returncode == 0
    (out / "notes.txt").write_text("mine")
    before = sorted(p.name for p in out.iterdir())
    proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith(f"error: output {out} holds files TreeRAG did not write (notes.txt)")
    assert sorted(p.name for p in out.iterdir()) == before and (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()  # with only its own files the rebuild goes ahead
    assert run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock").returncode == 0
