"""Config: the defaults the evaluation chose are pinned; the TOML file overrides them."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config, load_config_file
from tests.conftest import run_cli
from utils.errors import InputError


def test_config_file_overrides_defaults(tmp_path: Path) -> None:
    p = tmp_path / "treerag.toml"
    p.write_text('[treerag]\nllm = "openai:qwen"\n[treerag.ranking]\nfusion = "rrf"\ntop_k_per_leaf = 7\n'
                 'dense_weight = 1\n')
    cfg = load_config_file(p, {})
    r = cfg.ranking
    assert (r.fusion, r.top_k_per_leaf, r.dense_weight, cfg.llm) == ("rrf", 7, 1.0, "openai:qwen")
    assert cfg.chunk_size == Config().chunk_size and r.joint_top_k == Config().ranking.joint_top_k
    top = tmp_path / "top.toml"  # a top-level [ranking] table and dotted keys read the same
    top.write_text('final_top_k = 3\n"ranking.rrf_k" = 30\n[ranking]\nfusion = "rrf"\n')
    cfg = load_config_file(top, {})
    assert (cfg.final_top_k, cfg.ranking.rrf_k, cfg.ranking.fusion) == (3, 30, "rrf")


def test_settings_round_trip_through_their_names() -> None:
    """``to_dict`` names every setting as ``--set`` takes it; ``from_dict`` reads them back."""
    c = Config(final_top_k=3).with_settings({"ranking.joint_top_k": 0, "ranking.document_order": "fused"})
    d = c.to_dict()
    assert d["ranking.joint_top_k"] == 0 and "ranking" not in d and "joint_top_k" not in d
    assert Config.from_dict(d) == c and Config.from_dict(Config().to_dict()) == Config()
    for bad in ("ranking.nonsense", "nogroup.fusion", "nonsense", "ranking"):
        with pytest.raises(InputError, match=f"unknown setting '{bad}'"):
            Config().with_settings({bad: 1})


def test_config_file_from_environment(tmp_path: Path) -> None:
    p = tmp_path / "x.toml"
    p.write_text("final_top_k = 3\n")
    assert load_config_file(None, {"TREERAG_CONFIG": str(p)}).final_top_k == 3


@pytest.mark.parametrize("text, needle", [
    ("nonsense = 1\n", "unknown setting"),
    ("[ranking]\ntop_k_per_leaf = 'five'\n", "ranking.top_k_per_leaf must be an int, got 'five'"),
    ("final_top_k = \n", "not valid TOML"),
    # every Literal-like setting is checked, not only the typed ones (these ran as defaults before)
    ("[ranking]\nfusion = 'banana'\n", "ranking.fusion must be one of weighted, relative, rrf, got 'banana'"),
    ("fusion = 'rrf'\n", "unknown setting 'fusion': it is set as ranking.fusion"),
    ("ranking = 3\n", r"\[ranking\] must be a table"),
    ("[ranking]\nnonsense = 1\n", "unknown setting 'ranking.nonsense'"),
    ("chunk_context = 'banana'\n", "chunk_context must be one of none, headings"),
    ("locator = 'banana'\n", "locator must be one of auto, llm, llm-rerank, keyword, hybrid"),
    ("embedder = 'banana'\n", "embedder must be one of auto, hash"),
    ("reranker = 'colbert'\n", "reranker must be one of none, cross-encoder"),
    ("[ranking]\ndense_weight = 1.5\n", r"ranking.dense_weight must be in \[0, 1\], got 1.5"),
    ("[ranking]\njoint_top_k = -1\n", r"ranking.joint_top_k must be in \[0, 100000\], got -1"),
    ("chunk_overlap = 200\n", "chunk_overlap must be less than chunk_size"),
    ("final_top_k = 0\n", "final_top_k must be >= 1, got 0"),
    ("max_depth = 7\n", r"max_depth must be in \[0, 6\]"),
    ("max_depth = -1\n", r"max_depth must be in \[0, 6\]"),
    ("llm_query_budget_s = 0\n", "llm_query_budget_s must be > 0"),
    ("evidence_floor = nan\n", "evidence_floor must be in"),
    ("llm_cache = 1\n", "llm_cache must be a bool"),
])
def test_bad_config_file(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(InputError, match=needle):
        load_config_file(p, {})


def test_python_api_configs_are_validated_too() -> None:
    with pytest.raises(InputError, match="bm25_b must be in"):
        Config(bm25_b=2.0)
    with pytest.raises(InputError, match="chunk_overlap must be less than chunk_size"):
        Config().replace(chunk_size=40)  # the default overlap (50) no longer fits
    assert Config(chunk_size=60, chunk_overlap=10).chunk_overlap == 10


def test_one_converter_for_files_and_set() -> None:
    from config import coerce_setting

    assert coerce_setting("ranking.dense_weight", "0.7") == coerce_setting("ranking.dense_weight", 0.7) == 0.7
    assert isinstance(coerce_setting("ranking.dense_weight", 1), float)
    assert coerce_setting("llm_cache", "yes") is True and coerce_setting("embedder_model", "none") is None
    with pytest.raises(InputError, match="unknown setting"):
        coerce_setting("max_located", 5)  # removed: nothing read it


def test_missing_explicit_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="not found"):
        load_config_file(tmp_path / "nope.toml", {})
    monkeypatch.chdir(tmp_path)  # no ./treerag.toml here and none named: plain defaults
    assert load_config_file(None, {}) == Config()


def test_cli_reads_config_file(paper_index_dir: Path, tmp_path: Path) -> None:
    import json

    p = tmp_path / "c.toml"
    p.write_text("final_top_k = 2\n[ranking]\nfusion = \"rrf\"\n")
    proc = run_cli("--config", str(p), "query", "--index", str(paper_index_dir), "--query", "EUR/USD accuracy",
                   "--json", "--no-log")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["step2_retrieved"]) <= 2 and data["config"]["ranking.fusion"] == "rrf"
    bad = run_cli("--config", str(tmp_path / "missing.toml"), "query", "--index", str(paper_index_dir),
                  "--query", "x", "--no-log")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "not found" in bad.stderr


def test_defaults_chosen_by_evaluation_are_pinned() -> None:
    """Set by `python main.py eval` on QASPER dev and LeCoQA train (README, Evaluation).

    Changing one of these changes the reported figures: re-run the evaluation first.
    """
    c = Config()
    r = c.ranking
    assert (r.fusion, r.dense_weight, r.bm25_weight, r.rrf_k, r.fusion_depth) == ("weighted", 0.5, 0.5, 60, 40)
    assert (r.document_order, r.collection_order) == ("section-joint", "union-learned")
    assert (r.joint_top_k, r.union_flat_top_k, r.context_pool) == (20, 20, 60)
    assert c.bm25_idf_scope == "document"
    assert c.locator == "auto" and c.hybrid_top_leaves == 5 and c.locator_leaf_weight == 0.3
    assert c.ranker_weights is None
    assert c.chunk_context == "headings"
    assert r.top_k_per_leaf == 5 and c.final_top_k == 5
    assert c.reranker == "none"
    assert (c.chunk_size, c.chunk_overlap, c.max_depth) == (200, 50, 3)


@pytest.mark.parametrize("argv, needle", [
    (["query", "--index", "IDX", "-q", "x", "--top-k", "0"], "final_top_k must be >= 1, got 0"),
    (["query", "--index", "IDX", "-q", "x", "--top-k", "-1"], "final_top_k must be >= 1, got -1"),
    (["tree", "--input", "test_data/test_paper.md", "--max-depth", "-1"], "max_depth must be in [0, 6], got -1"),
])
def test_cli_numbers_out_of_range_are_one_line_errors(argv: list[str], needle: str) -> None:
    proc = run_cli(*argv)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"error: setting {needle}"


def test_cli_max_depth_zero_is_one_leaf_per_document_not_the_default() -> None:
    proc = run_cli("tree", "--input", "test_data/test_paper.md", "--max-depth", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout != run_cli("tree", "--input", "test_data/test_paper.md").stdout


def test_llm_timeout_summary_workers_and_store_come_from_the_config_file(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from main import _llm_timeout

    p = tmp_path / "t.toml"
    p.write_text('llm_timeout_s = 300\nsummary_workers = 2\nstore = "files"\n', encoding="utf-8")
    cfg = load_config_file(p, {})
    assert (cfg.llm_timeout_s, cfg.summary_workers, cfg.store) == (300.0, 2, "files")
    monkeypatch.delenv("TREERAG_LLM_TIMEOUT", raising=False)
    assert _llm_timeout(argparse.Namespace(llm_timeout=None), cfg) == 300.0   # the file
    assert _llm_timeout(argparse.Namespace(llm_timeout="30"), cfg) == 30.0    # the flag over it
    monkeypatch.setenv("TREERAG_LLM_TIMEOUT", "90")
    assert _llm_timeout(argparse.Namespace(llm_timeout=None), cfg) == 90.0    # the environment over the file
    for bad, needle in (("llm_timeout_s = 0", "llm_timeout_s"), ("summary_workers = 0", "summary_workers")):
        p.write_text(bad + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=needle):
            load_config_file(p, {})
