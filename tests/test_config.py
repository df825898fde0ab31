"""Config: the defaults the evaluation chose are pinned; the TOML file overrides them."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config, load_config_file
from tests.conftest import run_cli
from utils.errors import InputError


def test_config_file_overrides_defaults(tmp_path: Path) -> None:
    p = tmp_path / "treerag.toml"
    p.write_text('[treerag]\nllm = "openai:qwen"\nfusion = "rrf"\ntop_k_per_leaf = 7\ndense_weight = 1\n')
    cfg = load_config_file(p, {})
    r = cfg.tuning.ranking
    assert (r.fusion, r.top_k_per_leaf, r.dense_weight, cfg.llm) == ("rrf", 7, 1.0, "openai:qwen")
    assert cfg.chunk_size == Config().chunk_size and r.joint_top_k == Config().tuning.ranking.joint_top_k
    top = tmp_path / "top.toml"  # a ranking parameter at the top level, like any setting
    top.write_text('final_top_k = 3\nrrf_k = 30\nfusion = "rrf"\n')
    cfg = load_config_file(top, {})
    assert (cfg.final_top_k, cfg.tuning.ranking.rrf_k, cfg.tuning.ranking.fusion) == (3, 30, "rrf")


def test_settings_round_trip_through_their_flat_names() -> None:
    """``to_dict`` names every setting as ``--set`` takes it, the ranking group's too; ``of`` reads them back."""
    c = Config(final_top_k=3).replace(joint_top_k=0, document_order="fused")
    assert c.tuning.ranking.joint_top_k == 0 and c.setting("document_order") == "fused"
    d = c.to_dict()
    assert d["joint_top_k"] == 0 and d["document_order"] == "fused" and "ranking" not in d and "tuning" not in d
    assert not any("." in name for name in d)
    assert Config.of(d) == c and Config.of(Config().to_dict()) == Config()
    for bad in ("ranking.joint_top_k", "nonsense", "ranking", "candidate_order", "safety_net"):
        with pytest.raises(InputError, match=f"unknown setting '{bad}'"):
            Config().replace(**{bad: 1})


def test_config_file_from_environment(tmp_path: Path) -> None:
    p = tmp_path / "x.toml"
    p.write_text("final_top_k = 3\n")
    assert load_config_file(None, {"TREERAG_CONFIG": str(p)}).final_top_k == 3


@pytest.mark.parametrize("text, needle", [
    ("nonsense = 1\n", "unknown setting"),
    ("top_k_per_leaf = 'five'\n", "top_k_per_leaf must be an int, got 'five'"),
    ("final_top_k = \n", "not valid TOML"),
    # every Literal-like setting is checked, not only the typed ones (these ran as defaults before)
    ("fusion = 'banana'\n", "fusion must be one of weighted, relative, rrf, got 'banana'"),
    ("[ranking]\nfusion = 'rrf'\n", "unknown setting 'ranking'"),
    ("candidate_order = 'section'\n", "unknown setting 'candidate_order'"),  # removed: an ordering's name now
    ("chunk_context = 'banana'\n", "chunk_context must be one of none, headings"),
    ("locator = 'banana'\n", "locator must be one of auto, llm, llm-rerank, keyword, hybrid"),
    ("embedder = 'banana'\n", "embedder must be one of auto, hash"),
    ("reranker = 'colbert'\n", "reranker must be one of none, cross-encoder"),
    ("dense_weight = 1.5\n", r"dense_weight must be in \[0, 1\], got 1.5"),
    ("joint_top_k = -1\n", r"joint_top_k must be in \[0, 100000\], got -1"),
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
        Config().replace(bm25_b=2.0)
    with pytest.raises(InputError, match="chunk_overlap must be less than chunk_size"):
        Config().replace(chunk_size=40)  # the default overlap (50) no longer fits
    assert Config(chunk_size=60, chunk_overlap=10).chunk_overlap == 10


def test_one_converter_for_files_and_set() -> None:
    from config import coerce_setting

    assert coerce_setting("dense_weight", "0.7") == coerce_setting("dense_weight", 0.7) == 0.7
    assert isinstance(coerce_setting("dense_weight", 1), float)
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
    p.write_text("final_top_k = 2\nfusion = \"rrf\"\n")
    proc = run_cli("--config", str(p), "query", "--index", str(paper_index_dir), "--query", "EUR/USD accuracy",
                   "--json", "--no-log")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["step2_retrieved"]) <= 2 and data["config"]["fusion"] == "rrf"
    bad = run_cli("--config", str(tmp_path / "missing.toml"), "query", "--index", str(paper_index_dir),
                  "--query", "x", "--no-log")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "not found" in bad.stderr


def test_defaults_chosen_by_evaluation_are_pinned() -> None:
    """Set by `python main.py eval` on QASPER dev and LeCoQA train (README, Evaluation).

    Changing one of these changes the reported figures: re-run the evaluation first.
    """
    c = Config()
    r = c.tuning.ranking
    assert (r.fusion, r.dense_weight, r.bm25_weight, r.rrf_k, r.fusion_depth) == ("weighted", 0.5, 0.5, 60, 40)
    assert (r.document_order, r.collection_order) == ("section-joint", "union-learned")
    assert (r.joint_top_k, r.union_flat_top_k, r.context_pool) == (20, 20, 60)
    assert c.tuning.bm25.bm25_idf_scope == "document"
    assert c.locator == "auto" and c.tuning.locator.hybrid_top_leaves == 5 and c.tuning.locator.locator_leaf_weight == 0.3
    assert c.ranker_weights is None
    assert c.tuning.chunking.chunk_context == "headings"
    assert r.top_k_per_leaf == 5 and c.final_top_k == 5
    assert c.reranker == "none"
    assert (c.chunk_size, c.chunk_overlap, c.max_depth) == (200, 50, 3)
    # every tuning parameter: each feeds the evaluation's figures (docs/evaluation.md, docs/scale.md,
    # docs/seekdb.md), so each is pinned by value
    t = c.tuning
    assert (t.chunking.min_chunk_chars, t.chunking.chunk_units, t.chunking.chunk_context) == (20, "packed", "headings")
    assert (t.summary.summary_max_chars, t.summary.short_section_tokens) == (160, 200)
    assert (t.bm25.bm25_k1, t.bm25.bm25_b, t.bm25.bm25_epsilon, t.bm25.bm25_idf_scope) == (1.5, 0.75, 0.25, "document")
    assert (t.locator.keyword_top_leaves, t.locator.hybrid_top_leaves, t.locator.locator_leaf_weight,
            t.locator.toc_budget_tokens) == (3, 5, 0.3, 6000)
    assert (t.context.context_leaf_share, t.context.context_units_per_budget) == (0.5, 3)
    assert (t.breadth.query_routing, t.breadth.aspect_retrieval) == (True, True)
    assert (t.answer.answer_max_chars, t.answer.answer_max_sentences, t.answer.answer_rank_weight,
            t.answer.answer_bm25_weight, t.answer.answer_dense_candidates, t.answer.answer_min_relative) == (
        600, 4, 0.5, 0.5, 16, 0.5)
    g = t.graph
    assert (g.kg_min_leaf_chars, g.kg_max_nodes, g.kg_llm_window_chars, g.kg_llm_max_tokens) == (3000, 400, 6000, 2048)
    assert (g.kg_max_leaves, g.kg_top_chunks, g.kg_subgraph_nodes, g.kg_require_bridge, g.kg_ppr_restart) == (
        3, 2, 8, True, 0.5)
    s = t.store
    assert (s.store_exact_rows, s.store_candidates, s.store_fulltext_max_share) == (4096, 500, 0.1)
    assert (s.ann_min_rows, s.ann_candidates, s.ann_candidates_growth, s.ann_probe) == (250_000, 1000, 1 / 3, 0.3)


def test_tuning_parameters_are_set_by_their_names_and_land_in_their_component(tmp_path: Path) -> None:
    from config import Tuning, coerce_setting, setting_names

    p = tmp_path / "t.toml"
    p.write_text("context_leaf_share = 0.6\nkg_top_chunks = 4\nfinal_top_k = 3\n")
    cfg = load_config_file(p, {})
    assert cfg.tuning.context.context_leaf_share == 0.6 and cfg.tuning.graph.kg_top_chunks == 4
    assert cfg.final_top_k == 3 and cfg.tuning.answer == Tuning().answer  # the others keep their defaults
    changed = cfg.replace(bm25_idf_scope=coerce_setting("bm25_idf_scope", "corpus"), hybrid_top_leaves=2)
    assert changed.tuning.bm25.bm25_idf_scope == "corpus" and changed.tuning.locator.hybrid_top_leaves == 2
    assert changed.tuning.context == cfg.tuning.context and cfg.tuning.bm25.bm25_idf_scope == "document"
    assert changed.setting("hybrid_top_leaves") == 2 and changed.to_dict()["hybrid_top_leaves"] == 2
    # one flat namespace: no name in two places, and a record keeps every setting once
    names = setting_names()
    assert len(names) == len(set(names)) == len(Config().to_dict())
    assert Config.of(changed.to_dict()) == changed
    with pytest.raises(InputError, match="kg_ppr_restart must be in"):
        Config().replace(kg_ppr_restart=0)
    with pytest.raises(InputError, match="chunk_units must be one of paragraph, packed"):
        load_config_file(_toml(tmp_path, "chunk_units = 'lines'\n"), {})
    with pytest.raises(InputError, match="unknown setting 'context_hit_unit'"):
        coerce_setting("context_hit_unit", "window")  # removed: only its default was ever used


def test_each_component_owns_its_parameters_and_their_bounds() -> None:
    import dataclasses

    from config import Tuning

    for group in dataclasses.fields(Tuning):
        params = getattr(Tuning(), group.name)
        names = {f.name for f in dataclasses.fields(params)}
        assert set(type(params).RANGES) <= names, f"{group.name}: bounds for a parameter it does not have"
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(params, next(iter(names)), None)


def _toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "x.toml"
    p.write_text(text)
    return p


def test_every_setting_is_documented_for_users() -> None:
    from config import setting_names

    root = Path(__file__).resolve().parent.parent
    text = (root / "README.md").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in sorted((root / "docs").glob("*.md")))
    missing = [name for name in setting_names() if f"`{name}`" not in text]
    assert not missing, f"settings no README or docs page names: {missing}"


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

    from utils.cli_shared import llm_timeout

    p = tmp_path / "t.toml"
    p.write_text('llm_timeout_s = 300\nsummary_workers = 2\nstore = "files"\n', encoding="utf-8")
    cfg = load_config_file(p, {})
    assert (cfg.llm_timeout_s, cfg.summary_workers, cfg.store) == (300.0, 2, "files")
    monkeypatch.delenv("TREERAG_LLM_TIMEOUT", raising=False)
    assert llm_timeout(argparse.Namespace(llm_timeout=None), cfg) == 300.0   # the file
    assert llm_timeout(argparse.Namespace(llm_timeout="30"), cfg) == 30.0    # the flag over it
    monkeypatch.setenv("TREERAG_LLM_TIMEOUT", "90")
    assert llm_timeout(argparse.Namespace(llm_timeout=None), cfg) == 90.0    # the environment over the file
    for bad, needle in (("llm_timeout_s = 0", "llm_timeout_s"), ("summary_workers = 0", "summary_workers")):
        p.write_text(bad + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=needle):
            load_config_file(p, {})
