"""`eval --peer`: another system's rankings, on its own chunks, scored by the same rules as our arms."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluation.dataset import load_eval_set
from evaluation.metrics import SLICE_KEYS, distinct_ndcg
from evaluation.peer import PEER_FORMAT, load_peer_arms
from evaluation.report import format_table, run_to_dict
from evaluation.runner import BEST_FLAT, EvalOptions, run_eval
from tests.test_eval_runner import DOCS, QUESTIONS, _cli
from utils.errors import InputError, TreeRAGError

ARMS = ["flat-bm25", "flat-dense", "tree-hybrid"]


@pytest.fixture(scope="module")
def eval_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("set")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    (root / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return root


def _peer_file(root: Path, path: Path, **arm_overrides: object) -> Path:
    """Two peer arms over whole-paragraph chunks: an oracle (evidence first) and one that ranks backwards."""
    es = load_eval_set(root)
    chunks: list[list[object]] = []
    for d in es.documents:
        pos = 0
        for para in d.text.split("\n\n"):
            s = d.text.index(para, pos)
            pos = s + len(para)
            if para.strip():
                chunks.append([d.path, s, s + len(para.rstrip())])
    oracle, backwards = {}, {}
    for q in es.questions:
        ev = [i for i, (doc, s, e) in enumerate(chunks)
              if any(doc == item.doc and s <= a and b <= e for item in q.evidence for a, b in item.spans)]
        rest = [i for i in range(len(chunks)) if i not in ev]
        oracle[q.id] = {"rows": ev + rest, "latency_ms": 1.0}
        backwards[q.id] = {"rows": list(reversed(rest)) + ev, "latency_ms": 2.0}
    arms = [{"name": "peer-oracle", "config": {"chunk_size": 256}, "chunks": chunks, "results": oracle},
            {"name": "peer-backwards", "config": {}, "chunks": chunks, "results": backwards}]
    arms[0].update(arm_overrides)
    path.write_text(json.dumps({"format": PEER_FORMAT, "peer": "testpeer", "versions": {"testpeer": "1.0"},
                                "arms": arms}), encoding="utf-8")
    return path


def _opts(data: Path, cache: Path, **kw: object) -> EvalOptions:
    return EvalOptions(data=data, cache_root=cache, progress=False, notice=lambda m: None, resamples=300,
                       arms=ARMS, **kw)  # type: ignore[arg-type]


def test_peer_arms_are_scored_on_their_own_chunks_beside_ours(eval_set: Path, tmp_path: Path) -> None:
    peer = _peer_file(eval_set, tmp_path / "peer.json")
    run = run_eval(_opts(eval_set, tmp_path / "c", peers=[peer]))
    by = {s.name: s for s in run.summaries}
    assert list(by) == ARMS + ["peer-oracle", "peer-backwards"]
    oracle = by["peer-oracle"].means
    # evidence paragraphs ranked first: every in-scope item found at once, read within 2,000 characters
    assert oracle["dndcg@10"] == pytest.approx(1.0) and oracle["R@2k"] == pytest.approx(1.0)
    assert oracle["cov@2k"] == pytest.approx(1.0) and oracle["hit@1"] == pytest.approx(1.0)
    assert by["peer-backwards"].means["dndcg@10"] < oracle["dndcg@10"]
    assert by["peer-oracle"].means["leaf_recall"] is None
    # a peer is never the flat baseline, even when it is the best arm of the run
    assert {s.baseline for s in run.summaries} <= {"flat-bm25", "flat-dense"}
    sl = run.slices["all"]
    assert set(sl.baseline.values()) <= {"flat-bm25", "flat-dense"}
    assert set(sl.peer_baseline.values()) == {"peer-oracle"}
    assert set(sl.vs_peer) == {"tree-hybrid", BEST_FLAT} and set(sl.vs_peer["tree-hybrid"]) == set(SLICE_KEYS)
    ci = sl.vs_peer["tree-hybrid"]["dndcg@10"]
    assert ci.mean_b == pytest.approx(1.0) and ci.mean_a == pytest.approx(sl.means["tree-hybrid"]["dndcg@10"])
    # relevance is the peer's own: the per-question figure matches a direct computation
    r = run.results[0]
    assert r.scores["peer-oracle"]["dndcg@10"] == pytest.approx(
        distinct_ndcg(r.outputs["peer-oracle"].rows, r.peer_relevance["peer-oracle"]))
    table = format_table(run)
    assert "peer arm peer-oracle: testpeer (testpeer 1.0); chunk_size 256" in table
    assert "best peer arm for that figure" in table
    d = run_to_dict(run)
    assert set(d["peers"]) == {"peer-oracle", "peer-backwards"}
    q = next(q for q in d["questions"] if q["id"] == "q1")
    hit = q["arms"]["peer-oracle"]["retrieved"][0]
    doc = (eval_set / "docs" / hit["doc_path"]).read_text(encoding="utf-8")
    assert hit["relevant"] and doc[hit["start_char"]:hit["end_char"]] == hit["text"]
    assert "vs_peer" in d["slices"]["all"]


@pytest.mark.parametrize("change,needle", [
    ({"chunks": [["nope.md", 0, 5]]}, "not in this set's docs/"),
    ({"chunks": [["alpha.md", 5, 100000]]}, "outside 'alpha.md'"),
    ({"chunks": [["alpha.md", "0", 5]]}, "not [doc, start, end]"),
    ({"results": {}}, "has no result for question"),
    ({"name": "flat-bm25"}, "already used in this run"),
    ({"name": ""}, "an arm without a name"),
])
def test_a_bad_peer_file_is_a_one_line_error(eval_set: Path, tmp_path: Path, change: dict, needle: str) -> None:
    peer = _peer_file(eval_set, tmp_path / "peer.json", **change)
    es = load_eval_set(eval_set)
    with pytest.raises(InputError) as exc:
        load_peer_arms(peer, es, [q.id for q in es.questions], {"flat-bm25"})
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_peer_rows_must_index_its_chunks_and_the_file_must_be_one(eval_set: Path, tmp_path: Path) -> None:
    es = load_eval_set(eval_set)
    ids = [q.id for q in es.questions]
    peer = _peer_file(eval_set, tmp_path / "peer.json")
    obj = json.loads(peer.read_text())
    obj["arms"][0]["results"][ids[0]]["rows"] = [10 ** 6]
    peer.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="a row is not a chunk index"):
        load_peer_arms(peer, es, ids, set())
    (tmp_path / "x.json").write_text("[1, 2")
    with pytest.raises(InputError, match="not a JSON file"):
        load_peer_arms(tmp_path / "x.json", es, ids, set())
    (tmp_path / "y.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(InputError, match="not a peer file"):
        load_peer_arms(tmp_path / "y.json", es, ids, set())
    with pytest.raises(InputError, match="is a directory"):
        load_peer_arms(tmp_path, es, ids, set())
    with pytest.raises(InputError, match="not found"):
        load_peer_arms(tmp_path / "missing.json", es, ids, set())


def test_cli_peer_flag(eval_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    peer = _peer_file(eval_set, tmp_path / "peer.json")
    args = _cli(["--data", str(eval_set), "--arms", "flat-bm25,tree-hybrid", "--cache-dir", str(tmp_path / "c"),
                 "--quiet", "--resamples", "200", "--peer", str(peer)])
    assert args.func(args) == 0
    assert "peer-oracle" in capsys.readouterr().out
    args = _cli(["--data", str(eval_set), "--cache-dir", str(tmp_path / "c"), "--quiet",
                 "--peer", str(tmp_path / "nope.json")])
    with pytest.raises(TreeRAGError, match="not found"):
        args.func(args)


def test_a_bad_peer_file_fails_before_the_index_is_built(eval_set: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="not a peer file"):
        run_eval(_opts(eval_set, tmp_path / "c", peers=[bad]))
    assert not (tmp_path / "c" / "eval" / "indexes").exists()


def _peer_module(monkeypatch: pytest.MonkeyPatch):
    """benchmarks/peer_llamaindex.py as a module (LlamaIndex is imported only where it is used)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("peer_llamaindex",
                                                  Path(__file__).resolve().parent.parent / "benchmarks" /
                                                  "peer_llamaindex.py")
    peer = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "peer_llamaindex", peer)  # its dataclasses look their module up
    spec.loader.exec_module(peer)
    return peer


def test_the_recipes_pdf_chunks_map_onto_our_text_of_the_same_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/peer_llamaindex.py reads a PDF page by page with its own reader; each chunk is
    placed on our text of that page (whitespace ignored), else at the same relative position."""
    from dataclasses import dataclass

    from evaluation.dataset import SpaceFree

    peer = _peer_module(monkeypatch)

    @dataclass
    class Node:  # what the function reads of a LlamaIndex node
        text: str
        start_char_idx: int | None
        end_char_idx: int | None

        def get_content(self) -> str:
            return self.text

    ours = "HEADER\nTotal revenues 66,608\n62,286\nOther text that the other reader spells differently."
    theirs = "Total revenues 66,608 62,286 Other text that the other reader spells différently."
    base = 1000  # our page starts at character 1000 of the document
    counts = {"on-page": 0, "by-position": 0, "dropped": 0}
    nodes = [Node("Total revenues 66,608 62,286", 0, 28), Node("spells différently.", 60, 80)]
    spans = peer.page_chunk_spans(theirs, (base, base + len(ours)), SpaceFree.of(ours), nodes, counts)
    s0, e0 = spans[0]
    assert ours[s0 - base:e0 - base] == "Total revenues 66,608\n62,286"
    s1, e1 = spans[1]  # not on our page as written: the same share of the page, scaled to ours
    scale = len(ours) / len(theirs)
    assert (s1 - base, e1 - base) == (int(60 * scale), round(80 * scale))
    assert counts == {"on-page": 1, "by-position": 1, "dropped": 0}
    empty = peer.page_chunk_spans(theirs, (base, base), SpaceFree.of(""), nodes[1:], counts)
    assert empty == [None] and counts["dropped"] == 1


def test_the_recipes_vectors_are_cached_per_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """When our text changes, the recipe's chunks are mapped again and one drops or moves: only texts
    not embedded before are embedded, each text keeps its vector, and a torn cache is rebuilt."""
    peer = _peer_module(monkeypatch)
    asked: list[list[str]] = []

    def vector(text: str) -> list[float]:
        return [float(len(text)), float(sum(map(ord, text)))]

    def embed(texts: list[str]) -> np.ndarray:
        asked.append(list(texts))
        return np.array([vector(t) for t in texts])

    first = peer.cached_vectors(["a chunk", "another chunk", "a chunk"], "model-x", embed, tmp_path)
    again = peer.cached_vectors(["another chunk", "a new chunk"], "model-x", embed, tmp_path)
    assert asked == [["a chunk", "another chunk"], ["a new chunk"]]
    assert np.array_equal(again[0], first[1]) and np.array_equal(first[0], first[2])
    assert again[1].tolist() == vector("a new chunk")
    peer.cached_vectors(["a chunk"], "model-y", embed, tmp_path)  # another model: its own vectors
    assert asked[-1] == ["a chunk"]
    store = next(p for p in tmp_path.iterdir() if (p / "texts.json").read_text().count(",") == 2)
    (store / "texts.json").write_text('["only one"]')  # vectors and names disagree: embed again
    asked.clear()
    peer.cached_vectors(["a chunk"], "model-x", embed, tmp_path)
    assert asked == [["a chunk"]]
