"""Progress: one line per stage (with counts) when stderr is not a terminal, nothing with --quiet.

Only what is written is asserted, never how long anything took.
"""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

from evaluation.dataset import load_eval_set, sample_questions
from evaluation.eval_index import build_key, sample_documents
from evaluation.runner import EvalOptions, run_eval
from config import Config
from utils.progress import Progress, make_progress, stage

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "test_data" / "test_paper.md"


def test_a_stage_writes_one_line_with_its_count_when_not_a_terminal() -> None:
    out = io.StringIO()
    p = Progress(out)
    assert not p.live  # StringIO is no terminal
    with p.stage("reading documents") as st:
        st.count(3, "documents")
    with p.stage("embedding chunks", 20, "chunks") as st:
        for _ in range(20):
            st.advance(1)
    lines = out.getvalue().splitlines()
    assert re.fullmatch(r"reading documents: 3 documents, \d+\.\d s", lines[0])
    # a line at every tenth of the total, then the stage's own line with its rate
    steps = [ln for ln in lines if ln.startswith("embedding chunks: ") and "%" in ln]
    assert [re.search(r"(\d+)/20", ln).group(1) for ln in steps] == [str(2 * i) for i in range(1, 10)]
    assert re.fullmatch(r"embedding chunks: 20 chunks, \d+\.\d s, [\d,.]+ chunks/s", lines[-1])
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_a_failed_stage_writes_no_completion_line() -> None:
    out = io.StringIO()
    p = Progress(out)
    try:
        with p.stage("writing the index"):
            raise RuntimeError("disk full")
    except RuntimeError:
        pass
    assert out.getvalue() == ""


def test_quiet_means_no_progress_object_and_a_stage_that_says_nothing() -> None:
    assert make_progress(False) is None
    with stage(None, "anything", 5, "chunks") as st:
        st.advance(5)
        st.count(1, "x")


def test_the_older_factory_interface_ends_its_stage_at_the_total() -> None:
    out = io.StringIO()
    advance = Progress(out)(4, "summaries")
    advance(2)
    assert out.getvalue().splitlines() == [out.getvalue().splitlines()[0]]  # the 50% line only
    assert out.getvalue().startswith("summaries: 2/4 items (50%), ")
    advance(2)
    assert out.getvalue().splitlines()[-1].startswith("summaries: 4 items")


def _index(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "index", "--input", str(PAPER),
                           "--output", str(tmp_path / "idx"), "--mock", *extra],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)


def test_index_writes_each_stage_with_counts_on_a_pipe(tmp_path: Path) -> None:
    r = _index(tmp_path)
    assert r.returncode == 0, r.stderr
    chunks = int(re.search(r"(\d+) chunks in", r.stdout).group(1))
    lines = r.stderr.splitlines()
    done = [ln.split(":")[0] for ln in lines if "%" not in ln]
    assert done == ["reading documents", "plan", "indexing documents", "writing the index", "publishing"], r.stderr
    assert any(ln.startswith("plan: build ") and "embedder hash" in ln for ln in lines)
    assert any(re.match(r"reading documents: 1 documents, ", ln) for ln in lines)
    assert any(ln.startswith("indexing documents: 1 documents, ") for ln in lines)
    assert any(ln.startswith(f"writing the index: {chunks} chunks, ") for ln in lines)


def test_index_counts_documents_up_to_their_total_on_a_pipe(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"d{i:02d}.md").write_text(f"# Paper {i}\n\n## Part\n\nText {i} about widgets.\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(ROOT / "main.py"), "index", "--input", str(docs),
                        "--output", str(tmp_path / "idx"), "--mock"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "indexing documents: 12 documents, " in r.stderr
    # the bar's unit is documents: every intermediate line counts up to the document total
    for ln in r.stderr.splitlines():
        m = re.match(r"indexing documents: (\d+)/(\d+) documents", ln)
        if m:
            assert int(m.group(2)) == 12 and 0 < int(m.group(1)) < 12


def test_index_quiet_writes_no_progress(tmp_path: Path) -> None:
    r = _index(tmp_path, "--quiet")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "indexed 1 document(s)" in r.stdout


def test_a_real_embedders_model_load_is_its_own_stage(tmp_path: Path) -> None:
    """A real embedder's model load is a stage of its own, before the embedding bar starts."""
    r = subprocess.run([sys.executable, str(ROOT / "main.py"), "index", "--input", str(PAPER),
                        "--output", str(tmp_path / "idx"), "--embedder", "onnx"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    names = [ln.split(":")[0] for ln in r.stderr.splitlines() if "%" not in ln]
    assert names.index("loading the embedding model (onnx)") < names.index("indexing documents")


# ----------------------------------------------------------------------------- eval

DOCS = {f"d{i}.md": f"# Paper {i}\n\n## Method {i}\n\nThe method number {i} uses widget {i * 7} "
                    f"with a learning rate of {i}e-4.\n\n## Results {i}\n\nIt reached {50 + i} percent.\n"
        for i in range(6)}


def _set(root: Path, scoped: bool) -> Path:
    (root / "docs").mkdir(parents=True)
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    qs = []
    for i in range(6):
        q = {"id": f"q{i}", "query": f"What did method {i} reach?", "lang": "en",
             "evidence": [{"doc": f"d{i}.md", "text": f"It reached {50 + i} percent."}]}
        if scoped:
            q["scope"] = [f"d{i}.md"]
        qs.append(q)
    (root / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in qs) + "\n", encoding="utf-8")
    return root


def test_eval_shows_the_build_stages_and_questions_answered(tmp_path: Path, capsys) -> None:
    data = _set(tmp_path / "set", scoped=True)
    run_eval(EvalOptions(data=data, cache_root=tmp_path / "cache", notice=lambda m: None, resamples=50,
                         arms=["flat-bm25", "tree-hybrid"], embedder="hash"))
    err = capsys.readouterr().err
    assert re.search(r"^evaluation index: indexing documents: \d+ documents, ", err, re.M), err
    assert re.search(r"^questions \(2 arm\(s\) each, 0 of 12 runs cached\): 6 questions, ", err, re.M), err


def test_eval_limit_indexes_only_the_scoped_documents_it_needs(tmp_path: Path, monkeypatch) -> None:
    data = _set(tmp_path / "set", scoped=True)
    es = load_eval_set(data)
    picked = sample_questions(es.questions, 2, 0)
    subset = sample_documents(es, picked)
    assert subset == sorted(q.scope[0] for q in picked)
    config = Config(embedder="hash")
    assert build_key(es, config, subset) != build_key(es, config)  # the subset keys its own cached index
    # the same text read with other headings (a reader that changed) is another index, not a cached one
    import dataclasses

    from tree_builder.markdown_headings import parse_headings

    first = es.documents[0]
    read = dataclasses.replace(first, headings=tuple(parse_headings(first)))  # as a PDF reader hands them
    relevelled = dataclasses.replace(read, headings=tuple(dataclasses.replace(h, marker_level=h.marker_level + 1)
                                                         for h in read.headings))
    assert read.headings and relevelled.content_hash == read.content_hash
    keys = [build_key(dataclasses.replace(es, documents=[d, *es.documents[1:]]), config) for d in (read, relevelled)]
    assert keys[0] != keys[1]
    notes: list[str] = []
    # the same documents cut into another tree by changed builder code are another index too
    from evaluation import eval_index
    from evaluation.code_digest import closure_files, ROOT as CODE_ROOT

    assert CODE_ROOT / "tree_builder" / "tree.py" in closure_files(eval_index.BUILDER_MODULE)
    before = build_key(es, config)
    monkeypatch.setattr(eval_index, "closure_digest", lambda module: "other code")
    assert build_key(es, config) != before
    monkeypatch.undo()
    run = run_eval(EvalOptions(data=data, cache_root=tmp_path / "cache", notice=notes.append, resamples=50,
                               arms=["flat-bm25", "tree-hybrid"], embedder="hash", limit=2, progress=False))
    assert sorted(d["path"] for d in run.index.metadata["documents"]) == subset
    assert run.index_info["documents"] == 2 and run.n_scored == 2
    assert any("indexing only the 2 of 6 documents" in n for n in notes)
    from evaluation.report import format_table

    assert "holding only the 2 of 6 documents the sampled questions are scoped to" in format_table(run)
    again = run_eval(EvalOptions(data=data, cache_root=tmp_path / "cache", notice=lambda m: None, resamples=50,
                                 arms=["flat-bm25", "tree-hybrid"], embedder="hash", limit=2, progress=False))
    assert again.index_info["source"] == "cached" and again.computed == 0


def test_eval_limit_over_the_whole_collection_indexes_every_document(tmp_path: Path) -> None:
    data = _set(tmp_path / "set", scoped=False)
    es = load_eval_set(data)
    assert sample_documents(es, sample_questions(es.questions, 2, 0)) is None
    run = run_eval(EvalOptions(data=data, cache_root=tmp_path / "cache", notice=lambda m: None, resamples=50,
                               arms=["flat-bm25"], embedder="hash", limit=2, progress=False))
    assert len(run.index.metadata["documents"]) == len(DOCS)


def test_eval_limit_reuses_a_cached_index_of_the_whole_set(tmp_path: Path) -> None:
    data = _set(tmp_path / "set", scoped=True)
    opts = dict(data=data, cache_root=tmp_path / "cache", notice=lambda m: None, resamples=50,
                arms=["flat-bm25"], embedder="hash", progress=False)
    run_eval(EvalOptions(**opts))  # builds the whole set's index
    run = run_eval(EvalOptions(**opts, limit=2))
    assert run.index_info["source"] == "cached" and len(run.index.metadata["documents"]) == len(DOCS)


class _FakeClock:
    """A clock the test moves: the heartbeat is checked without waiting."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_silent_stage_writes_where_it_is_after_the_heartbeat_with_counts_and_rates() -> None:
    out, clock = io.StringIO(), _FakeClock()
    p = Progress(out, heartbeat=30.0, clock=clock)
    with p.stage("indexing documents", 30, "documents") as st:
        clock.now += 29.0
        st.tick(500, "vectors")
        assert out.getvalue() == ""  # 29 s: not yet
        clock.now += 1.0
        st.tick(100, "vectors")  # 30 s without a line
        assert out.getvalue().splitlines() == [
            "indexing documents: 0/30 documents (0%), 600 vectors (20.0/s), 30.0 s"]
        clock.now += 10.0
        st.tick(100, "vectors")
        assert len(out.getvalue().splitlines()) == 1  # 10 s after the last line
        clock.now += 20.0
        st.advance(1)  # an advance that crosses no tenth still beats after 30 s of silence
        assert out.getvalue().splitlines()[-1] == \
            "indexing documents: 1/30 documents (3%), 700 vectors (11.7/s), 60.0 s"
    assert out.getvalue().splitlines()[-1] == "indexing documents: 1/30 documents, 60.0 s, 0.0 documents/s"


def test_a_stage_without_a_total_beats_too_and_a_terminal_gets_no_heartbeat_lines() -> None:
    out, clock = io.StringIO(), _FakeClock()
    p = Progress(out, clock=clock)
    with p.stage("reading documents") as st:
        for _ in range(4):
            clock.now += 16.0
            st.tick(1, "documents")
        st.count(4, "documents")
    assert out.getvalue().splitlines() == ["reading documents: 2 documents (0.1/s), 32.0 s",
                                           "reading documents: 4 documents (0.1/s), 64.0 s",
                                           "reading documents: 4 documents, 64.0 s"]
    live = io.StringIO()
    with Progress(live, live=True, clock=clock).stage("reading documents") as st:
        clock.now += 60.0
        st.tick(1, "documents")
    assert "/s)" not in live.getvalue()  # a terminal has its bar or spinner, no heartbeat lines


def test_a_build_hears_from_the_embedding_inside_one_document(tmp_path: Path) -> None:
    """One long document: the document count cannot move while its chunks are embedded, the vectors do."""
    from indexing.embedders.hash_embedder import HashEmbedder
    from indexing.index_builder import build_index

    doc = tmp_path / "docs" / "long.md"
    doc.parent.mkdir()
    doc.write_text("# Long\n\n" + "\n\n".join(f"## Part {i}\n\nParagraph {i} about widgets and gears "
                                             f"number {i}." for i in range(600)), encoding="utf-8")
    out, clock = io.StringIO(), _FakeClock()

    def ticking() -> float:  # every look at the clock is 31 s later: each chance to beat is taken
        clock.now += 31.0
        return clock.now

    build_index(doc.parent, tmp_path / "idx", Config(), HashEmbedder(), progress=Progress(out, clock=ticking))
    beats = [ln for ln in out.getvalue().splitlines()
             if re.match(r"indexing documents: [01]/1 documents \(\d+%\), [\d,]+ vectors \([\d,.]+/s\), [\d.]+ s$", ln)]
    assert len(beats) >= 2, out.getvalue()
    counts = [int(re.search(r"([\d,]+) vectors", ln).group(1).replace(",", "")) for ln in beats]
    assert counts == sorted(counts) and counts[-1] > counts[0]
