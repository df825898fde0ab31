"""Config: the defaults the evaluation chose are pinned; the TOML file overrides them."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config, load_config_file
from tests.conftest import run_cli
from utils.errors import InputError


def test_config_file_overrides_defaults(tmp_path: Path) -> None:
    p = tmp_path / "treerag.toml"
    p.write_text('[treerag]\nfusion = "rrf"\ntop_k_per_leaf = 7\ndense_weight = 1\nllm = "openai:qwen"\n')
    cfg = load_config_file(p, {})
    assert (cfg.fusion, cfg.top_k_per_leaf, cfg.dense_weight, cfg.llm) == ("rrf", 7, 1.0, "openai:qwen")
    assert cfg.chunk_size == Config().chunk_size


def test_config_file_from_environment(tmp_path: Path) -> None:
    p = tmp_path / "x.toml"
    p.write_text("final_top_k = 3\n")
    assert load_config_file(None, {"TREERAG_CONFIG": str(p)}).final_top_k == 3


@pytest.mark.parametrize("text, needle", [
    ("nonsense = 1\n", "unknown setting"),
    ("top_k_per_leaf = 'five'\n", "must be a int"),
    ("fusion = \n", "not valid TOML"),
])
def test_bad_config_file(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(InputError, match=needle):
        load_config_file(p, {})


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
    assert (c.fusion, c.dense_weight, c.bm25_weight) == ("weighted", 0.5, 0.5)
    assert c.bm25_idf_scope == "document"
    assert c.locator == "auto" and c.hybrid_top_leaves == 5 and c.locator_leaf_weight == 0.3
    assert c.candidate_order == "auto" and c.ranker_weights is None and c.leaf_prior_weight == 0.4
    assert c.chunk_context == "headings"
    assert c.top_k_per_leaf == 5 and c.final_top_k == 5
    assert c.safety_net is False and c.reranker == "none"
    assert (c.chunk_size, c.chunk_overlap, c.max_depth) == (200, 50, 3)
