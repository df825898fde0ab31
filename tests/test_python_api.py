"""`from pipeline import TreeRAG`: the query pipeline as a library, equal to `query --json`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import ChunkHit, QueryResult, TreeRAG
from tests.conftest import run_cli
from utils.errors import IndexFormatError, InputError

Q = "What is AdaRouter's accuracy on EUR/USD?"
VOLATILE = ("run_id", "created_at", "timing_ms")


def _stable(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in VOLATILE}


def test_ask_returns_a_typed_result_equal_to_query_json(paper_index_dir: Path) -> None:
    rag = TreeRAG.open(paper_index_dir, llm="mock", env={})
    r = rag.ask(Q)
    assert isinstance(r, QueryResult) and r.query == Q and r.answer and r.evidence_found
    assert r.chunks and all(isinstance(c, ChunkHit) and c.text for c in r.chunks)
    first = r.chunks[0]
    assert first.rank == 1 and first.doc_path.endswith(".md") and first.lines[0] <= first.lines[1]
    assert first.citation.startswith(first.doc_path) and "section_score" in first.scores
    assert r.located and r.located[0].node_id and r.located[0].heading_path
    assert r.timing_ms["total"] > 0
    assert r.to_dict()["context"]["passages"]  # what step 3 read travels with the result, as in --json
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", Q, "--json", "--no-log", "--llm", "mock")
    assert proc.returncode == 0, proc.stderr
    assert _stable(r.to_dict()) == _stable(json.loads(proc.stdout))


def test_settings_are_validated_and_applied(paper_index_dir: Path) -> None:
    rag = TreeRAG.open(paper_index_dir, llm="mock", env={}, final_top_k=2, fusion="rrf")
    r = rag.ask(Q)
    assert len(r.chunks) <= 2 and r.to_dict()["config"]["fusion"] == "rrf" and r.record.config["fusion"] == "rrf"
    with pytest.raises(InputError, match="fusion must be one of"):
        TreeRAG.open(paper_index_dir, llm="mock", env={}, fusion="banana")
    with pytest.raises(InputError, match="unknown setting 'ranking.fusion'"):  # flat names only
        TreeRAG.open(paper_index_dir, llm="mock", env={}, **{"ranking.fusion": "rrf"})
    with pytest.raises(InputError, match="evaluation variants"):
        TreeRAG.open(paper_index_dir, llm="mock", env={}, document_order="section-every")
    # a tuning parameter by its name, like any setting: it reaches its component and the record
    tuned = TreeRAG.open(paper_index_dir, llm="mock", env={}, context_leaf_share=0.6, joint_top_k=0)
    assert tuned.config.tuning.context.context_leaf_share == 0.6 and tuned.config.tuning.ranking.joint_top_k == 0
    record = tuned.run(Q).config
    assert record["context_leaf_share"] == 0.6 and record["joint_top_k"] == 0
    with pytest.raises(InputError, match="context_leaf_share must be in"):
        TreeRAG.open(paper_index_dir, llm="mock", env={}, context_leaf_share=2)
    with pytest.raises(InputError, match="unknown setting"):
        TreeRAG.open(paper_index_dir, llm="mock", env={}, no_such_setting=1)


def test_bad_questions_scopes_and_indexes_are_one_line_errors(paper_index_dir: Path, tmp_path: Path) -> None:
    rag = TreeRAG.open(paper_index_dir, llm="mock", env={})
    with pytest.raises(InputError, match="empty question"):
        rag.ask("  ")
    with pytest.raises(InputError, match="not in the index: nope.md"):
        rag.ask(Q, documents=["nope.md"])
    doc = rag.ask(Q).chunks[0].doc_path
    assert {c.doc_path for c in rag.ask(Q, documents=[doc]).chunks} == {doc}
    with pytest.raises(IndexFormatError):
        TreeRAG.open(tmp_path, llm="mock", env={})


def test_runs_are_logged_only_when_asked(paper_index_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "runs.sqlite3"
    TreeRAG.open(paper_index_dir, llm="mock", env={}).ask(Q)
    assert not log.exists()
    r = TreeRAG.open(paper_index_dir, llm="mock", env={}, log=log).ask(Q)
    shown = run_cli("show", r.run_id[:10], "--json", "--log", str(log))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == r.run_id
