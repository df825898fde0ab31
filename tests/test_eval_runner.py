"""`eval` end to end on a tiny synthetic set with hash embeddings: every arm, scope, cache, resume."""
from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

from config import Config
from evaluation.arms import all_arm_names, make_arm, parse_arms
from evaluation.cli import add_eval_parser, parse_overrides
from evaluation.metrics import (SCORE_KEYS, SLICE_KEYS, SLICES, context_figures, coverage_at_budget,
                                paired_bootstrap, read_context)
from evaluation.report import format_table, run_to_dict
from evaluation.runner import (EvalOptions, QuestionResult, _score, context_passages, read_passages, run_eval,
                               summarize_slice)
from utils.errors import InputError, TreeRAGError
from utils.llm.mock import MockLLM

DOCS = {
    "alpha.md": """# Alpha Router

## Overview

The alpha router sends orders to six venues. It learns which venue fills best.

## Training

Training used fifty epochs with the AdamW optimizer and a batch size of 512.
The learning rate was three times ten to the minus four.

## Results

Fill accuracy reached 73.2 percent on EUR/USD, against 65.1 percent for the static router.
""",
    "beta.md": """# Beta Parser

## Grammar

The beta parser reads a context free grammar written in extended Backus Naur form.

## Error Recovery

On a syntax error the parser skips tokens until a semicolon, then resumes parsing.
Panic mode recovery keeps error messages short.

## Zebra Unique Heading

Benchmarks show the parser handles two million lines per second on one core.
""",
    "gamma.md": """# Gamma Store

## Storage Engine

Gamma stores records in a log structured merge tree with leveled compaction.

## Replication

Every write is replicated to three nodes using the Raft consensus protocol before acknowledgement.
""",
}


def _q(qid: str, query: str, evidence: list[tuple[str, str]], scope: list[str] | None = None) -> dict:
    d: dict = {"id": qid, "query": query, "lang": "en",
               "evidence": [{"doc": doc, "text": text} for doc, text in evidence], "answers": []}
    if scope:
        d["scope"] = scope
    return d


QUESTIONS = [
    _q("q1", "How many epochs and which optimizer were used for training?",
       [("alpha.md", "Training used fifty epochs with the AdamW optimizer and a batch size of 512.")],
       scope=["alpha.md"]),
    _q("q2", "What fill accuracy on EUR/USD?",
       [("alpha.md", "Fill accuracy reached 73.2 percent on EUR/USD, against 65.1 percent for the static router.")]),
    _q("q3", "How does the parser recover from a syntax error?",
       [("beta.md", "On a syntax error the parser skips tokens until a semicolon, then resumes parsing."),
        ("beta.md", "this sentence is not in the document")], scope=["beta.md"]),
    _q("q4", "Which consensus protocol replicates writes?",
       [("gamma.md", "Every write is replicated to three nodes using the Raft consensus protocol before acknowledgement.")]),
    _q("q5", "How are records stored?",
       [("gamma.md", "Gamma stores records in a log structured merge tree with leveled compaction.")],
       scope=["gamma.md", "beta.md"]),
    _q("q6", "Which heading is unique?", [("beta.md", "Zebra Unique Heading")]),  # only a heading: unscorable
]

FLAT_AND_TREE = all_arm_names(with_llm=False)


@pytest.fixture(scope="module")
def eval_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("set")
    for name, text in DOCS.items():
        (root / "docs").mkdir(exist_ok=True)
        (root / "docs" / name).write_text(text, encoding="utf-8")
    (root / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return root


def _opts(data: Path, cache: Path, **kw) -> EvalOptions:
    kw.setdefault("resamples", 300)
    return EvalOptions(data=data, cache_root=cache, progress=False, notice=lambda m: None, **kw)


def _numbers(run) -> list:
    return [(s.name, s.n, s.means, s.vs_baseline) for s in run.summaries]


def test_every_arm_is_scored_and_a_rerun_comes_from_the_cache(eval_set: Path, tmp_path: Path) -> None:
    run = run_eval(_opts(eval_set, tmp_path))
    assert [s.name for s in run.summaries] == FLAT_AND_TREE
    assert run.n_scored == 5 and run.unscorable == ["q6"]
    assert run.eval_set.missing_evidence == 1
    assert run.computed == 5 * len(FLAT_AND_TREE) and run.cached == 0
    table = format_table(run)
    for name in FLAT_AND_TREE:
        assert re.search(rf"^{re.escape(name)}\s", table, re.M), name
    assert "5 question(s) scored" in table and "(baseline)" in table
    by = {s.name: s for s in run.summaries}
    # the baseline is the best flat arm of the run, by nDCG@10; it is not compared with itself
    flat = [s for s in run.summaries if s.name.startswith("flat-")]
    best = max(flat, key=lambda s: (s.means["ndcg@10"], s.name == "flat-hybrid"))  # ties: flat-hybrid
    assert {s.baseline for s in run.summaries} == {best.name}
    assert by[best.name].vs_baseline is None and by[best.name].vs_baseline_cov is None
    assert by["tree-hybrid"].vs_baseline is not None and by["tree-hybrid"].vs_baseline.n == 5
    assert by["tree-hybrid"].vs_baseline_cov is not None
    assert by["tree-hybrid"].vs_baseline.mean_b == pytest.approx(best.means["ndcg@10"])
    assert all(0.0 <= s.means["cov@2k"] <= 1.0 for s in run.summaries)
    assert by["flat-bm25"].means["leaf_recall"] is None
    assert by["tree-hybrid"].means["leaf_recall"] is not None
    # every question's evidence is findable by words: the lexical arms must find most of it
    assert by["flat-bm25"].means["hit@5"] >= 0.8

    again = run_eval(_opts(eval_set, tmp_path))
    assert again.computed == 0 and again.cached == run.computed
    assert again.index_info["source"] == "cached"
    assert _numbers(again) == _numbers(run)
    assert [s.p95_ms for s in again.summaries] == [s.p95_ms for s in run.summaries]


def test_scope_limits_every_arm(eval_set: Path, tmp_path: Path) -> None:
    run = run_eval(_opts(eval_set, tmp_path))
    checked = 0
    for r in run.results:
        if not r.question.scope:
            continue
        for name, out in r.outputs.items():
            assert out.rows, (r.question.id, name)
            docs = {run.index.chunks[row].doc_path for row in out.rows}
            assert docs <= set(r.question.scope), (r.question.id, name, docs)
            assert {run.index.get_node(n).doc_path for n in out.located_ids} <= set(r.question.scope)
            checked += 1
    assert checked == 3 * len(FLAT_AND_TREE)


def test_arm_configs() -> None:
    base = Config().replace(**{"fusion": "rrf"})
    assert make_arm("flat-hybrid", base, 10).config.tuning.ranking.fusion == "weighted"
    # flat-hybrid is the score fusion the config names (weighted or relative); rrf has its own arm
    relative = Config().replace(**{"fusion": "relative"})
    assert make_arm("flat-hybrid", relative, 10).config.tuning.ranking.fusion == "relative"
    assert make_arm("flat-hybrid-rrf", Config(), 10).config.tuning.ranking.fusion == "rrf"
    t = make_arm("tree-keyword+net", base, 7).config
    assert (t.locator, t.final_top_k, t.tuning.ranking.fusion) == ("keyword", 7, "rrf")
    assert (t.tuning.ranking.document_order, t.tuning.ranking.collection_order) == ("section-joint+net", "union-learned+net")
    netted = Config().replace(**{"collection_order": "union-blend+net"})
    assert make_arm("tree-hybrid", netted, 10).config.tuning.ranking.collection_order == "union-blend"
    with pytest.raises(InputError, match="unknown ordering 'banana'"):
        make_arm("tree-hybrid", Config().replace(**{"document_order": "banana"}), 10)
    assert parse_arms("tree-hybrid, flat-bm25", with_llm=False) == ["flat-bm25", "tree-hybrid"]
    with pytest.raises(InputError, match="unknown arm 'flat-magic'"):
        parse_arms("flat-magic", with_llm=False)
    with pytest.raises(InputError, match="needs an LLM"):
        parse_arms("tree-llm", with_llm=False)
    assert "tree-llm+net" in all_arm_names(with_llm=True)


def test_interrupted_run_resumes(eval_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluation.runner as runner

    real = runner.run_arm
    calls = {"n": 0}
    warm = len(FLAT_AND_TREE)  # one untimed warm-up run per arm

    def flaky(*a, **kw):
        calls["n"] += 1
        if calls["n"] > warm + 7:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(runner, "run_arm", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_eval(_opts(eval_set, tmp_path))
    monkeypatch.setattr(runner, "run_arm", real)
    resumed = run_eval(_opts(eval_set, tmp_path))
    assert resumed.cached == 7
    assert resumed.computed == 5 * len(FLAT_AND_TREE) - 7
    fresh = run_eval(_opts(eval_set, tmp_path / "other"))
    assert [(s.name, s.means) for s in resumed.summaries] == [(s.name, s.means) for s in fresh.summaries]


def test_torn_cache_line_is_ignored(eval_set: Path, tmp_path: Path) -> None:
    run = run_eval(_opts(eval_set, tmp_path, arms=["flat-bm25"]))
    (results,) = (tmp_path / "eval" / "results").glob("*.jsonl")
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # killed mid-write
    again = run_eval(_opts(eval_set, tmp_path, arms=["flat-bm25"]))
    assert again.computed == 1 and again.cached == run.computed - 1
    third = run_eval(_opts(eval_set, tmp_path, arms=["flat-bm25"]))
    assert third.computed == 0


def test_changed_settings_or_seed(eval_set: Path, tmp_path: Path) -> None:
    run_eval(_opts(eval_set, tmp_path, arms=["tree-hybrid"]))
    changed = run_eval(_opts(eval_set, tmp_path, arms=["tree-hybrid"],
                             config=Config().replace(hybrid_top_leaves=1)))
    assert changed.computed == 5
    assert all(len(r.outputs["tree-hybrid"].located) <= 1 for r in changed.results)
    sample = run_eval(_opts(eval_set, tmp_path, arms=["tree-hybrid"], limit=2, seed=1))
    assert sample.sampled == 2 and sample.computed == 0  # a subset of what is cached


class FakeLLM(MockLLM):
    """A 'real' provider for the pipeline: answers locating prompts with the first leaf shown."""

    provider = "fake"

    def __init__(self) -> None:
        super().__init__(replies=self._reply, model="fake-1")

    @staticmethod
    def _reply(request) -> str:
        assert "文档结构" in request.prompt, "eval must never ask the LLM for anything but locating"
        leaf = re.search(r"\[(\d{4})\][^\n]*\(叶子节点\)", request.prompt).group(1)
        return json.dumps({"thinking": "first leaf", "results": [{"node_id": leaf, "sub_query": "x"}]})


def test_llm_arms_locate_with_the_llm_and_never_synthesise(eval_set: Path, tmp_path: Path) -> None:
    llm = FakeLLM()
    run = run_eval(_opts(eval_set, tmp_path, llm=llm, arms=["flat-hybrid", "tree-llm", "tree-llm+net"]))
    assert [s.name for s in run.summaries] == ["flat-hybrid", "tree-llm", "tree-llm+net"]
    assert len(llm.requests) == 2 * run.n_scored  # one locating call per question and arm, nothing else
    for r in run.results:
        for name in ("tree-llm", "tree-llm+net"):
            out = r.outputs[name]
            assert out.locator == "llm" and len(out.located) == 1
            assert out.usage["calls"] == 1
    assert run.summaries[1].means["leaf_precision"] is not None


class _Reranker:
    name = "cross-encoder"
    model = "fake-ce"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def score(self, query: str, texts: list[str]) -> list[float]:
        if self.fail:
            raise OSError("no such model folder")
        return [-float(len(t)) for t in texts]  # shortest first: an order no retriever produces


def test_rerank_applies_to_every_arm(eval_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline

    monkeypatch.setattr(pipeline, "make_reranker", lambda config: _Reranker())
    cfg = Config().replace(reranker="cross-encoder", reranker_model="fake-ce")
    run = run_eval(_opts(eval_set, tmp_path, config=cfg, arms=["flat-bm25", "tree-hybrid+net"]))
    for r in run.results:
        for name, out in r.outputs.items():
            assert out.rows and all("rerank_score" in d for d in out.details), name
            lengths = [len(run.index.chunks[row].text) for row in out.rows]
            assert lengths == sorted(lengths), name


def test_unloadable_reranker_is_an_error_not_a_silent_fallback(eval_set: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import pipeline

    monkeypatch.setattr(pipeline, "make_reranker", lambda config: _Reranker(fail=True))
    cfg = Config().replace(reranker="cross-encoder", reranker_model="fake-ce")
    with pytest.raises(TreeRAGError, match="reranker 'fake-ce' cannot be loaded: no such model folder"):
        run_eval(_opts(eval_set, tmp_path, config=cfg, arms=["flat-bm25"]))


def test_given_index_must_match_the_documents(eval_set: Path, tmp_path: Path) -> None:
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    other = tmp_path / "other_docs"
    other.mkdir()
    (other / "alpha.md").write_text(DOCS["alpha.md"] + "\nMore text.\n", encoding="utf-8")
    build_index(other, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    with pytest.raises(InputError, match="was not built from .*document\\(s\\) differ"):
        run_eval(_opts(eval_set, tmp_path, index=tmp_path / "idx"))


# --------------------------------------------------------------------------- command line

def _cli(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_eval_parser(p.add_subparsers(dest="command"))
    return p.parse_args(["eval", *argv])


def test_cli_prints_the_table_and_writes_json(eval_set: Path, tmp_path: Path, capsys) -> None:
    out_json = tmp_path / "out.json"
    args = _cli(["--data", str(eval_set), "--arms", "flat-hybrid,tree-keyword", "--json", str(out_json),
                 "--cache-dir", str(tmp_path / "c"), "--quiet", "--resamples", "200",
                 "--set", "keyword_top_leaves=2"])
    assert args.func(args) == 0
    table = capsys.readouterr().out
    assert "flat-hybrid" in table and "tree-keyword" in table and "tree-hybrid" not in table
    d = json.loads(out_json.read_text())
    assert [row["arm"] for row in d["table"]] == ["flat-hybrid", "tree-keyword"]
    assert d["n_scored"] == 5 and d["arm_configs"]["tree-keyword"]["keyword_top_leaves"] == 2
    q = next(q for q in d["questions"] if q["id"] == "q1")
    hit = q["arms"]["flat-hybrid"]["retrieved"][0]
    assert set(hit) >= {"doc_path", "start_char", "end_char", "text", "scores", "relevant"}
    doc_text = (eval_set / "docs" / hit["doc_path"]).read_text(encoding="utf-8")
    assert doc_text[hit["start_char"]:hit["end_char"]] == hit["text"]
    # the dump is enough to re-score: relevance flags agree with the recorded evidence spans
    (ev,) = q["evidence"]
    assert hit["relevant"] == any(
        2 * max(0, min(hit["end_char"], e) - max(hit["start_char"], s)) >= min(hit["end_char"] - hit["start_char"], e - s)
        and min(hit["end_char"], e) > max(hit["start_char"], s) for s, e in ev["spans"])
    assert all("gold" in n for n in q["arms"]["tree-keyword"]["located"])


@pytest.mark.parametrize("argv,needle", [
    (["--arms", "nope"], "unknown arm 'nope'"),
    (["--arms", "tree-llm"], "needs an LLM"),
    (["--k", "0"], "--k must be at least 1"),
    (["--limit", "0"], "--limit must be at least 1"),
    (["--set", "fusion=magic"], "--set fusion must be one of weighted, relative, rrf, got 'magic'"),
    (["--set", "ranking.fusion=rrf"], "--set ranking.fusion: unknown setting 'ranking.fusion'"),
    (["--set", "safety_net=true"], "--set safety_net: unknown setting 'safety_net'"),
    (["--set", "nosuch=1"], "--set nosuch: unknown setting 'nosuch'"),
    (["--set", "dense_weight=1.5"], "setting dense_weight must be in [0, 1], got 1.5"),
    (["--set", "chunk_overlap=300"], "chunk_overlap must be less than chunk_size"),
    (["--set", "final_top_k=two"], "--set final_top_k must be an int, got 'two'"),
    (["--set", "hybrid_top_leaves=x"], "hybrid_top_leaves must be an int, got"),
    (["--json", "/nonexistent-dir/x.json"], "--json: folder"),
])
def test_cli_bad_inputs(eval_set: Path, tmp_path: Path, argv: list[str], needle: str) -> None:
    args = _cli(["--data", str(eval_set), "--cache-dir", str(tmp_path), "--quiet", *argv])
    with pytest.raises(TreeRAGError) as exc:
        args.func(args)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_parse_overrides_types() -> None:
    assert parse_overrides(["llm_cache=true", "dense_weight=0.7", "hybrid_top_leaves=4",
                            "embedder_model=none", "bm25_idf_scope=corpus"]) == {
        "llm_cache": True, "dense_weight": 0.7, "hybrid_top_leaves": 4, "embedder_model": None,
        "bm25_idf_scope": "corpus"}


def test_json_dump_round_trips(eval_set: Path, tmp_path: Path) -> None:
    run = run_eval(_opts(eval_set, tmp_path, arms=["flat-dense", "tree-hybrid"]))
    d = json.loads(json.dumps(run_to_dict(run)))
    # the only flat arm is the baseline; the tree arm is compared with it
    assert d["table"][0]["baseline"] == "flat-dense" and d["table"][0]["ndcg@10_vs_baseline"] is None
    assert d["table"][1]["ndcg@10_vs_baseline"]["n"] == 5 and d["table"][1]["cov@2k_vs_baseline"]["n"] == 5
    assert {row["chunk_context"] for row in d["table"]} == {"headings"}
    assert len(d["questions"]) == 5


class FakeReranker(FakeLLM):
    """Answers the small leaf re-ranking prompt by picking its last candidate."""

    @staticmethod
    def _reply(request) -> str:
        assert "候选章节" in request.prompt, "the rerank arm asks only to re-order candidates"
        last = re.findall(r"^\[(\d{4})\] ", request.prompt, re.M)[-1]
        return json.dumps({"results": [{"node_id": last, "sub_query": "x"}]})


def test_llm_rerank_arm_uses_the_small_prompt_once_per_question(eval_set: Path, tmp_path: Path) -> None:
    llm = FakeReranker()
    run = run_eval(_opts(eval_set, tmp_path, llm=llm, arms=["tree-hybrid", "tree-llm-rerank"]))
    assert len(llm.requests) == run.n_scored
    for r in run.results:
        out = r.outputs["tree-llm-rerank"]
        assert out.locator == "llm-rerank" and len(out.located) == 1 and out.usage["calls"] == 1


def _copy_product(dest: Path) -> Path:
    """The product's sources and the data beside them, copied under ``dest`` (the layout kept)."""
    from evaluation.code_digest import ROOT, module_files

    for src in module_files(ROOT).values():
        for path in [src, *(p for p in src.parent.glob("*.json"))]:
            target = dest / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return dest


@pytest.mark.parametrize("edited", ["retrieval/term_coverage.py", "retrieval/locate_prompts.py",
                                    "indexing/bm25_corpus.py", "retrieval/ranker_weights.json"])
def test_editing_code_an_arm_reaches_misses_the_result_cache(eval_set: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, edited: str) -> None:
    """The cache key is the arm module's import closure, read from the source tree it runs from: an
    unchanged copy of the tree is a hit for every run, one edited scoring file a miss for every run."""
    import evaluation.runner as runner

    first = run_eval(_opts(eval_set, tmp_path / "c", arms=["flat-bm25", "tree-hybrid"]))
    copy = _copy_product(tmp_path / "src")
    monkeypatch.setattr(runner, "ROOT", copy)
    same = run_eval(_opts(eval_set, tmp_path / "c", arms=["flat-bm25", "tree-hybrid"]))
    assert same.computed == 0 and same.cached == first.computed

    with (copy / edited).open("a", encoding="utf-8") as fh:
        fh.write("\n" if edited.endswith(".json") else "\n# edited\n")
    edited_run = run_eval(_opts(eval_set, tmp_path / "c", arms=["flat-bm25", "tree-hybrid"]))
    assert edited_run.computed == first.computed and edited_run.cached == 0


def test_code_outside_the_arms_closure_does_not_key_the_cache(tmp_path: Path) -> None:
    """The web server is not code an arm runs: editing it keeps every cached result."""
    from evaluation.code_digest import import_closure
    from evaluation.runner import code_fingerprint

    assert "server.app" not in import_closure("evaluation.arms")
    copy = _copy_product(tmp_path / "src")
    before = code_fingerprint(copy)
    with (copy / "server" / "app.py").open("a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    assert code_fingerprint(copy) == before
    with (copy / "retrieval" / "term_coverage.py").open("a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    assert code_fingerprint(copy) != before


@pytest.mark.parametrize("raw", ["nan", "0", "-5", "soon"])
def test_eval_reads_the_llm_timeout_like_the_query_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            raw: str) -> None:
    from evaluation.cli import _make_llm

    monkeypatch.setenv("TREERAG_LLM_TIMEOUT", raw)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(TreeRAGError, match="LLM timeout must be a"):
        _make_llm("openai:x", tmp_path, 60.0)
    monkeypatch.setenv("TREERAG_LLM_TIMEOUT", "900")
    assert _make_llm("openai:x", tmp_path, 60.0).inner.timeout == 900.0
    monkeypatch.delenv("TREERAG_LLM_TIMEOUT")  # then the config's llm_timeout_s
    assert _make_llm("openai:x", tmp_path, 240.0).inner.timeout == 240.0


# --------------------------------------------------------------------------- each item once, slices

def _fake_results(values: dict[str, dict[str, list[float]]], slices: list[set[str]]) -> list[QuestionResult]:
    """Per question scores: ``values[arm][figure]`` per question, 0.5 for any figure not given."""
    out = []
    for i, sl in enumerate(slices):
        scores = {}
        for arm, figs in values.items():
            tree = arm.startswith("tree-")
            scores[arm] = {k: (figs[k][i] if k in figs else 0.5) for k in SCORE_KEYS}
            if not tree:
                scores[arm]["leaf_recall"] = scores[arm]["leaf_precision"] = None
        out.append(QuestionResult(question=None, relevance=None, outputs={}, scores=scores,  # type: ignore[arg-type]
                                  slices=frozenset(sl)))
    return out


def test_each_figure_of_a_slice_is_held_to_its_own_best_flat_arm() -> None:
    arms = [make_arm(n, Config(), 10) for n in ("flat-bm25", "flat-dense", "tree-hybrid")]
    values = {"flat-bm25": {"ndcg@10": [1.0, 0.8, 0.6, 0.4], "R@2k": [0.2, 0.2, 0.2, 0.2]},
              "flat-dense": {"ndcg@10": [0.5, 0.5, 0.5, 0.5], "R@2k": [0.6, 0.4, 0.8, 1.0]},
              "tree-hybrid": {"ndcg@10": [0.9, 0.9, 0.3, 0.3], "R@2k": [0.5, 0.5, 1.0, 1.0]}}
    results = _fake_results(values, [{"all", "one-leaf"}, {"all", "one-leaf"},
                                     {"all", "multi-leaf"}, {"all", "multi-leaf"}])
    every = summarize_slice("all", arms, results, resamples=400, seed=2)
    assert every.n == 4
    assert every.baseline["ndcg@10"] == "flat-bm25" and every.baseline["R@2k"] == "flat-dense"
    assert every.baseline["cov@8k"] == "flat-bm25"  # a tie: the first flat arm
    assert set(every.baseline) == set(SLICE_KEYS)
    assert "ndcg@10" not in every.vs_baseline["flat-bm25"] and "R@2k" in every.vs_baseline["flat-bm25"]
    assert "R@2k" not in every.vs_baseline["flat-dense"]
    assert set(every.vs_baseline["tree-hybrid"]) == set(SLICE_KEYS)
    ci = every.vs_baseline["tree-hybrid"]["R@2k"]
    one = paired_bootstrap(values["tree-hybrid"]["R@2k"], values["flat-dense"]["R@2k"], resamples=400, seed=2)
    assert (ci.n, ci.mean_a, ci.mean_b) == (4, pytest.approx(0.75), pytest.approx(0.7))
    assert ci.rel == pytest.approx(0.75 / 0.7 - 1)
    assert (ci.low, ci.high, ci.rel_low, ci.rel_high) == pytest.approx((one.low, one.high, one.rel_low, one.rel_high))
    assert every.means["tree-hybrid"]["leaf_recall"] == 0.5 and every.means["flat-bm25"]["leaf_recall"] is None

    one_leaf = summarize_slice("one-leaf", arms, results, resamples=400, seed=2)
    assert one_leaf.n == 2 and one_leaf.means["tree-hybrid"]["ndcg@10"] == pytest.approx(0.9)
    assert one_leaf.vs_baseline["tree-hybrid"]["ndcg@10"].mean_b == pytest.approx(0.9)  # flat-bm25 here
    multi = summarize_slice("multi-leaf", arms, results, resamples=400, seed=2)
    assert multi.baseline["ndcg@10"] == "flat-bm25"  # 0.5 = 0.5: the first flat arm
    assert multi.baseline["R@2k"] == "flat-dense" and multi.means["flat-dense"]["R@2k"] == pytest.approx(0.9)
    empty = summarize_slice("multi-doc", arms, results, resamples=400, seed=2)
    assert (empty.n, empty.means, empty.baseline, empty.vs_baseline) == (0, {}, {}, {})
    assert summarize_slice("all", arms, results, resamples=400, seed=2) == every  # seeded


def test_context_figures_read_the_recorded_context_else_the_ranked_chunks(eval_set: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    run = run_eval(_opts(eval_set, tmp_path, arms=["flat-bm25", "tree-hybrid"]))
    arms = {a.name: a for a in run.arms}
    for r in run.results:
        for name, out in r.outputs.items():
            s = r.scores[name]
            assert set(s) == set(SCORE_KEYS), name
            assert 0.0 <= s["dndcg@10"] <= 1.0
            assert set(out.contexts) == {"2000", "4000", "8000"}
            given = [(d, (a, b)) for d, a, b in out.contexts["8000"]]
            assert context_passages(out, 8000, run.index) == given
            assert s["R@8k"] == context_figures(given, r.relevance, 8000)["R@8k"]
            # without a recorded context the answer step reads the ranked chunks: cov@2k as before
            bare = replace(out, contexts={})
            ranked = [(run.index.chunks[row].doc_path, (run.index.chunks[row].start_char,
                                                        run.index.chunks[row].end_char)) for row in out.rows]
            assert context_passages(bare, 2000, run.index) == ranked
            assert _score(arms[name], bare, r.relevance, run.index)["cov@2k"] == pytest.approx(
                coverage_at_budget(ranked, r.relevance, 2000))
    assert list(run.slices) == list(SLICES)
    assert run.slices["all"].n == run.n_scored
    for name, sl in run.slices.items():
        assert sl.n == sum(1 for r in run.results if name in r.slices), name
    assert run.slices["one-leaf"].n == 5 and run.slices["multi-doc"].n == 0  # one paragraph each


def test_report_prints_slice_tables_and_the_json_holds_context_and_slices(eval_set: Path, tmp_path: Path) -> None:
    run = run_eval(_opts(eval_set, tmp_path, arms=["flat-bm25", "flat-dense", "tree-hybrid"]))
    table = format_table(run)
    assert "slice all: 5 question(s)" in table and "slice one-leaf: 5 question(s)" in table
    assert "slice multi-doc" not in table  # no question: no table
    block = table[table.index("slice all:"):table.index("slice one-leaf:")]
    assert re.search(r"^arm\s+dnDCG@10\s+R@2k\s+any@2k\s+all@2k\s+cov@2k\s+R@8k\s+any@8k\s+all@8k\s+cov@8k$",
                     block, re.M)
    assert "R@4k" not in block
    assert re.search(r"^tree-hybrid\s+\d\.\d{3}", block, re.M)  # means row
    assert re.search(r"^tree-hybrid(\s+(\d\.\d\d\*?|-)){9}$", block, re.M)  # ratio row
    assert re.search(r"^\s+\[\d\.\d\d,\d\.\d\d\]", block, re.M)  # its intervals
    assert re.search(r"^best flat(\s+(bm25|dense)){9}$", block, re.M)
    assert max(len(l) for l in block.splitlines()) <= 140

    d = json.loads(json.dumps(run_to_dict(run)))
    assert d["context_budgets"] == [2000, 4000, 8000]
    assert all(k in d["table"][2] for k in SCORE_KEYS)
    sl = d["slices"]
    assert list(sl) == list(SLICES) and sl["all"]["n"] == 5 and sl["multi-doc"]["n"] == 0
    assert set(sl["all"]["means"]) == {"flat-bm25", "flat-dense", "tree-hybrid"}
    assert set(sl["all"]["baseline"]) == set(SLICE_KEYS)
    assert set(sl["all"]["vs_baseline"]["tree-hybrid"]) == set(SLICE_KEYS)
    assert sl["all"]["vs_baseline"]["tree-hybrid"]["R@4k"]["n"] == 5
    by_id = {r.question.id: r for r in run.results}
    for q in d["questions"]:
        assert q["slices"][0] == "all" and set(q["slices"]) == set(by_id[q["id"]].slices)
        for name, arm in q["arms"].items():
            out = by_id[q["id"]].outputs[name]
            ctx = [(c["doc_path"], (c["start_char"], c["end_char"])) for c in arm["context"]]
            assert ctx == read_passages(out, 8000, run.index)
            read = read_context(ctx, 8000).read
            assert sum(b - a for spans in read.values() for a, b in spans) <= 8000
            text = (eval_set / "docs" / ctx[0][0]).read_text(encoding="utf-8")
            assert 0 <= ctx[0][1][0] < ctx[0][1][1] <= len(text)


def test_eval_reads_the_config_file_like_every_other_command(eval_set: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from main import build_parser

    toml = tmp_path / "settings.toml"
    toml.write_text("keyword_top_leaves = 1\nhybrid_top_leaves = 4\n", encoding="utf-8")
    monkeypatch.delenv("TREERAG_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    out_json = tmp_path / "out.json"
    common = ["eval", "--data", str(eval_set), "--arms", "tree-keyword", "--json", str(out_json),
              "--cache-dir", str(tmp_path / "c"), "--quiet", "--resamples", "50"]
    args = build_parser().parse_args(["--config", str(toml), *common, "--set", "hybrid_top_leaves=2"])
    assert args.func(args) == 0
    used = json.loads(out_json.read_text())["arm_configs"]["tree-keyword"]
    assert used["keyword_top_leaves"] == 1      # from the file
    assert used["hybrid_top_leaves"] == 2       # --set wins over the file
    # $TREERAG_CONFIG is read when --config is not given
    monkeypatch.setenv("TREERAG_CONFIG", str(toml))
    args = build_parser().parse_args(common)
    assert args.func(args) == 0
    assert json.loads(out_json.read_text())["arm_configs"]["tree-keyword"]["keyword_top_leaves"] == 1


def test_ranker_folds_run_each_question_with_its_folds_weights(eval_set: Path, tmp_path: Path) -> None:
    shipped = json.loads((Path(__file__).parents[1] / "retrieval" / "ranker_weights.json").read_text(encoding="utf-8"))
    folds = tmp_path / "folds"
    folds.mkdir()
    (folds / "fold-0.json").write_text(json.dumps(shipped), encoding="utf-8")
    # fold 1: tree and joint models that order by the leaf heading alone, so the folds rank differently
    odd = {"leaf_heading": 1.0, "bm25_mm": -1.0}
    (folds / "fold-1.json").write_text(json.dumps({**shipped, "tree": odd, "joint": odd}), encoding="utf-8")
    assign = {"q1": 0, "q2": 0, "q3": 1, "q4": 1, "q5": 0, "q6": 1}
    (folds / "folds.json").write_text(json.dumps({"folds": 2, "sets": {eval_set.name: assign}}), encoding="utf-8")
    arms = ["tree-hybrid", "flat-hybrid"]
    run = run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds))
    by_fold = {f: run_eval(_opts(eval_set, tmp_path / "c", arms=arms,
                                 config=Config(ranker_weights=str(folds / f"fold-{f}.json")))) for f in (0, 1)}
    for qr in run.results:
        ref = next(r for r in by_fold[assign[qr.question.id]].results if r.question.id == qr.question.id)
        assert qr.outputs["tree-hybrid"].rows == ref.outputs["tree-hybrid"].rows, qr.question.id
    q3 = [{r.question.id: r.outputs["tree-hybrid"].rows for r in by_fold[f].results}["q3"] for f in (0, 1)]
    assert q3[0] != q3[1]  # the weights matter for a question of one document
    # a rewritten weights file is a new result, not a cached one
    (folds / "fold-1.json").write_text(json.dumps(shipped), encoding="utf-8")
    again = run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds))
    q3_again = {r.question.id: r.outputs["tree-hybrid"].rows for r in again.results}["q3"]
    assert q3_again == q3[0] and again.computed > 0

    # the folds may hold a model the shipped file lacks (the paragraph model): the run uses the folds' only
    for f in (0, 1):
        (folds / f"fold-{f}.json").write_text(json.dumps({**shipped, "para": {"para_mean": 1.0, "dense": 1.0}}),
                                              encoding="utf-8")
    para = run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds,
                          config=Config()))
    assert para.n_scored == run.n_scored
    (folds / "folds.json").write_text(json.dumps({"folds": 2, "sets": {eval_set.name: {"q1": 0}}}), encoding="utf-8")
    with pytest.raises(InputError, match="in no fold"):
        run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds))
    (folds / "folds.json").write_text(json.dumps({"folds": 2, "sets": {"other": {}}}), encoding="utf-8")
    with pytest.raises(InputError, match="no folds for the set"):
        run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds))
    # a cut of a set (another folder name, the same question ids) reads the one set that holds them all
    (folds / "folds.json").write_text(json.dumps({"folds": 2, "sets": {"whole-set": {**assign, "q9": 1},
                                                                        "other": {"q1": 0}}}), encoding="utf-8")
    cut = run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds))
    assert cut.n_scored == run.n_scored
    (folds / "folds.json").write_text(json.dumps({"folds": 2, "sets": {"a": assign, "b": assign}}), encoding="utf-8")
    with pytest.raises(InputError, match="no folds for the set"):  # two sets hold them: which is not guessed
        run_eval(_opts(eval_set, tmp_path / "c", arms=arms, ranker_folds=folds))
