"""Long-leaf graphs: rules extraction (English, Chinese), the graph files (round trip, updates,
corruption), the graph channel (a two-hop question whose facts lie 3,000 characters apart in one
leaf), the synthesis prompt's graph paths, the `graph` command and the eval's +kg arms."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from config import Config
from indexing.kg_extract import MAX_DEGREE, extract_rules, question_mentions
from indexing.kg_graph import LeafGraph
from tests.conftest import run_cli
from utils.errors import IndexFormatError

FILLER = [
    "Routing latency was measured on a shared cluster with eight worker nodes and a warm cache.",
    "Each experiment was repeated five times and the median of the runs is reported here.",
    "The scheduler assigns requests in arrival order and drops none of them during the trial.",
    "Memory use stayed below twelve gigabytes on every worker for the whole duration of the study.",
    "Hyperparameters follow common practice: a learning rate schedule with linear warm-up and decay.",
    "Logging was kept minimal so that the measured throughput reflects the system and not its probes.",
    "The evaluation harness replays recorded traffic at its original pace, including its bursts.",
    "Failures of individual workers were injected at random intervals to test recovery behaviour.",
    "All code runs under the same interpreter version and the same operating system image.",
    "Power draw was read from the rack controller once per second and averaged per experiment.",
    "Queue lengths were sampled every hundred milliseconds and summarised as percentiles afterwards.",
    "The network between workers offers ten gigabits per second with negligible packet loss.",
    "Warm-up requests are excluded from every figure so that caches start in a steady state.",
    "Configuration files are versioned together with the code that reads them for each run.",
    "Timeouts were set generously so that no request was cut short by the harness itself.",
    "A watchdog restarts a stalled worker after thirty seconds without a heartbeat message.",
    "Results from the first day were discarded because of a misconfigured load balancer.",
    "Every figure in this section is computed from the raw logs by a single script.",
    "Reviewers can rerun the whole pipeline from the archived traces with one command.",
    "The tables below report means with standard deviations over the repeated runs.",
    "Measurements on the second cluster agree with the first within two percent.",
    "Background jobs on the cluster were paused for the duration of every measurement.",
    "Large request bursts were trained into the load generator from a recorded collection of traces.",
    "How large the batch is matters less than how the collection of requests is ordered.",
    "The scheduler was trained on a large collection of synthetic arrival patterns first.",
    "Disk throughput was never the bottleneck, so storage settings were left at their defaults.",
    "Clock drift between workers was corrected with a time server before every session.",
    "The dashboard shows throughput, latency and error rates side by side for each run.",
    "A large collection of request logs was trained into the replay tool before each session.",
    "Operators were not told which configuration was active during any of the sessions.",
    "Request sizes ranged from a few tokens to several thousand, with a long tail of short ones.",
    "The replay tool can slow down or speed up traffic, but every reported run used real time.",
    "Each worker pins its threads to cores to keep the measurements free of migration noise.",
    "Temperature in the machine room was logged as well and stayed within normal bounds.",
    "We release the traces, the scripts and the configuration files with this paper.",
]
FACT_A = "The AdaRouter model was trained on the ZetaCorpus collection assembled by our group."
FACT_B = "ZetaCorpus holds 4.2 million sentences of Icelandic news text gathered over a decade."
QUESTION = "How large is the collection that AdaRouter was trained on?"


def multi_hop_paper() -> str:
    body = "\n\n".join([FACT_A] + FILLER + [FACT_B])
    return ("# Routing Study\n\n## 1 Introduction\n\nWe study request routing for language models in production.\n\n"
            "## 2 Setup\n\n" + body + "\n\n## 3 Results\n\nThe router lowers latency by a fifth under load.\n")


def _build(docs: Path, out: Path, **settings):
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    config = Config.of({"kg_mode": "rules", **settings})
    return build_index(docs, out, config, make_embedder("hash", config))


@pytest.fixture(scope="module")
def hop_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hop")
    (d / "paper.md").write_text(multi_hop_paper(), encoding="utf-8")
    out = d / "index"
    _build(d / "paper.md", out)
    return out


# ----------------------------------------------------------------------------- extraction

def _names(g: LeafGraph) -> dict[str, tuple[str, list[str]]]:
    return {n.name: (n.type, n.aliases) for n in g.nodes}


def _edge(g: LeafGraph, a: str, b: str):
    for e in g.edges:
        pair = {g.nodes[e.head].name, g.nodes[e.tail].name}
        if pair == {a, b}:
            return e
    return None


def test_rules_extract_english_entities_acronyms_terms_quantities_and_references() -> None:
    chunks = ["We train AdaRouter on ZetaCorpus. The Long Short-Term Memory (LSTM) baseline reaches 81.2% "
              "accuracy (see Table 2).",
              "ZetaCorpus contains 4.2 million tokens of Icelandic news. The LSTM is described in Section 3.",
              "AdaRouter routes tokens between experts; we call this mechanism \"expert routing\"."]
    g = extract_rules("n1", chunks)
    names = _names(g)
    assert names["LSTM"] == ("acronym", ["Long Short-Term Memory"])  # expansion merged as an alias
    assert names["Table 2"][0] == "ref" and names["Section 3"][0] == "ref"
    assert names["81.2%"][0] == "quantity" and names["4.2 million"][0] == "quantity"
    assert names["expert routing"][0] == "term"
    lstm = next(n for n in g.nodes if n.name == "LSTM")
    assert lstm.chunks == [0, 1]  # one node for both mentions, pointing at both chunks
    e = _edge(g, "AdaRouter", "ZetaCorpus")
    assert e is not None and e.relation == "on" and e.chunks == [0] and e.weight == 1.0
    assert _edge(g, "LSTM", "Section 3").relation == "is described in"
    # deterministic: the same text gives the same graph
    assert extract_rules("n1", chunks).to_record() == g.to_record()


def test_rules_extract_chinese_articles_relative_references_and_nouns() -> None:
    chunks = ["第十条 用人单位应当与劳动者订立书面劳动合同。前款规定的劳动合同应当载明工作内容。",
              "第十一条 违反本法第十条规定的，由劳动行政部门责令改正，处五千元罚款。前条所称劳动合同包括集体合同。"]
    g = extract_rules("z1", chunks)
    names = _names(g)
    art10 = next(n for n in g.nodes if n.name == "第十条")
    assert art10.type == "ref" and {"前款", "前条"} <= set(art10.aliases)  # 前款 in 第十条, 前条 in 第十一条
    assert art10.chunks == [0, 1]
    assert {"用人单位", "劳动者", "劳动合同", "罚款"} <= set(names)  # jieba nouns
    assert names["五千元"][0] == "quantity"
    cites = _edge(g, "第十一条", "第十条")
    assert cites is not None and cites.chunks == [1]
    assert ("劳动合同", "劳动合同") in question_mentions("违反劳动合同的罚款是多少？")


def test_rules_graph_caps_hub_degree() -> None:
    # Kappa co-occurs with 50 different systems, in a quarter of the leaf's chunks
    chunks = [f"Zeta{i} relies on Kappa." if i % 4 == 0 else f"Omega{i} works alone." for i in range(200)]
    g = extract_rules("h1", chunks)
    kappa = next(i for i, n in enumerate(g.nodes) if n.name == "Kappa")
    assert len(g.nodes[kappa].chunks) == 50
    assert g.degrees()[kappa] == MAX_DEGREE == g.max_degree()  # its strongest edges, no more
    assert len(g.nodes) <= 400


def test_graph_record_rejects_out_of_range_references() -> None:
    g = extract_rules("n1", ["AdaRouter is trained on ZetaCorpus."])
    rec = g.to_record()
    assert LeafGraph.from_record(json.loads(json.dumps(rec)), "x", n_chunks=1).to_record() == rec
    bad = json.loads(json.dumps(rec))
    bad["nodes"][0][3] = [5]
    with pytest.raises(IndexFormatError, match="not chunks of the leaf"):
        LeafGraph.from_record(bad, "x", n_chunks=1)
    bad = json.loads(json.dumps(rec))
    bad["edges"][0][1] = 99
    with pytest.raises(IndexFormatError, match="edge"):
        LeafGraph.from_record(bad, "x", n_chunks=1)


# ----------------------------------------------------------------------------- files

def test_graph_files_round_trip_and_verify(hop_index: Path) -> None:
    from indexing.index_store import load_index, verify_index

    index = load_index(hop_index)
    assert index.kg is not None and index.metadata["kg"]["graphs"] == 1
    g = index.kg.for_leaf("0002")
    assert g is not None and index.kg.for_leaf("0001") is None  # the short leaf has none
    lo, hi = index.leaf_rows["0002"]
    texts = [index.chunks[r].text for r in range(lo, hi)]
    fresh = extract_rules("0002", texts)
    assert [n.name for n in g.nodes] == [n.name for n in fresh.nodes]
    assert all(0 <= k < hi - lo for n in g.nodes for k in n.chunks)
    v = verify_index(hop_index)
    assert v.graphs is not None and v.graphs.graphs == 1 and v.graphs.max_degree == g.max_degree()
    assert "1 long-leaf graphs are valid" in v.line(hop_index)
    for name in ("kg_graphs.jsonl", "kg_graph_offsets.npy", "kg_leaves.npy"):
        assert name in index.metadata["files"]  # in the manifest like every other file


def test_graph_files_survive_corruption(hop_index: Path, tmp_path: Path) -> None:
    import shutil

    from indexing.index_files import write_manifest_entry
    from indexing.index_store import load_index

    bad = tmp_path / "idx"
    shutil.copytree(hop_index, bad)
    data = (bad / "kg_graphs.jsonl").read_bytes()
    (bad / "kg_graphs.jsonl").write_bytes(data.replace(b'"nodes"', b'"nodez"', 1))
    with pytest.raises(IndexFormatError, match="kg_graphs.jsonl"):  # the manifest catches the edit
        load_index(bad)
    r = run_cli("verify", "--index", str(bad))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "kg_graphs.jsonl" in r.stderr

    # a well-formed manifest over a broken table: the table's own checks say what is wrong
    meta = json.loads((bad / "metadata.json").read_text())
    np.save(bad / "kg_leaves.npy", np.array([0, 0, 0], dtype=np.int64), allow_pickle=False)
    (bad / "kg_graphs.jsonl").write_bytes(data)
    for name in ("kg_leaves.npy", "kg_graphs.jsonl"):
        meta["files"][name] = write_manifest_entry(bad, name)
    (bad / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="kg_leaves.npy"):
        load_index(bad)

    # a graph record that names chunks its leaf does not have
    rec = json.loads(data)
    rec["nodes"][0][3] = [999]
    line = (json.dumps(rec, ensure_ascii=False) + "\n").encode()
    (bad / "kg_graphs.jsonl").write_bytes(line)
    np.save(bad / "kg_graph_offsets.npy", np.array([0, len(line)], dtype=np.int64), allow_pickle=False)
    np.save(bad / "kg_leaves.npy", np.array([-1, 0, -1], dtype=np.int64), allow_pickle=False)
    for name in ("kg_leaves.npy", "kg_graphs.jsonl", "kg_graph_offsets.npy"):
        meta["files"][name] = write_manifest_entry(bad, name)
    (bad / "metadata.json").write_text(json.dumps(meta))
    index = load_index(bad)
    with pytest.raises(IndexFormatError, match="not chunks of the leaf"):
        index.kg.for_leaf("0002")


def test_graphs_are_incremental_with_the_leaf(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(multi_hop_paper(), encoding="utf-8")
    (docs / "b.md").write_text(multi_hop_paper().replace("AdaRouter", "BetaRouter"), encoding="utf-8")
    out = tmp_path / "index"
    first = _build(docs, out, kg_mode="off")
    assert first.kg is None
    # graphs added to an index with unchanged documents: no vector re-embedded, every graph extracted
    added = _build(docs, out)
    assert added.update is not None and added.update.embedded_chunks == 0
    assert (added.kg.graphs, added.kg.extracted, added.kg.reused) == (2, 2, 0)
    # one document edited: only its leaf's graph is extracted again
    (docs / "b.md").write_text(multi_hop_paper().replace("AdaRouter", "GammaRouter"), encoding="utf-8")
    again = _build(docs, out)
    assert (again.kg.extracted, again.kg.reused) == (1, 1)
    from indexing.index_store import load_index

    index = load_index(out)
    names = {n.name for leaf in index.kg.leaves_with_graphs() for n in index.kg.for_leaf(leaf).nodes}
    assert "GammaRouter" in names and "BetaRouter" not in names
    # graphs off again: the files go with them
    _build(docs, out, kg_mode="off")
    assert load_index(out).kg is None and not (out / "kg_graphs.jsonl").exists()


def test_index_and_graph_commands(tmp_path: Path) -> None:
    doc = tmp_path / "paper.md"
    doc.write_text(multi_hop_paper(), encoding="utf-8")
    out = tmp_path / "index"
    r = run_cli("index", "--input", str(doc), "--output", str(out), "--mock", "--kg", "rules", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "graphs for 1 long leaves (> 3000 chars, rules)" in r.stdout and "max degree" in r.stdout
    r = run_cli("graph", "--index", str(out))
    assert r.returncode == 0 and "0002" in r.stdout and "2 Setup" in r.stdout
    r = run_cli("graph", "--index", str(out), "--leaf", "0002", "--json")
    g = json.loads(r.stdout)
    assert any(e["head"] == "ZetaCorpus" and "0002_chunk_" in e["chunks"][0] for e in g["edges"])
    r = run_cli("graph", "--index", str(out), "--leaf", "0001")
    assert r.returncode != 0 and "has no graph" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("index", "--input", str(doc), "--output", str(tmp_path / "i2"), "--mock", "--kg", "llm")
    assert r.returncode != 0 and "--kg llm needs an LLM" in r.stderr


# ----------------------------------------------------------------------------- query

ANCHOR_RANKER = {"tree": {"dense": 1.028722, "dense_mm": 1.158745, "bm25_mm": 0.24298, "bm25_hit": 0.373456, "leaf_max": 0.393316, "leaf_top3": 1.354382, "leaf_heading": 3.501799, "neighbour": 1.622271, "section_max": 0.63549, "doc_max": 0.0, "doc_top3": 0.0, "located": 0.273298},
                 "flat": {"dense": 3.677977, "dense_mm": 1.788123, "bm25_mm": 1.248433, "bm25_hit": 0.421876}}
"""A section ranker (an earlier shipped fit) under which the paper's first fact is its leaf's best
candidate: the graph channel bridges from that anchor, and these tests are about the channel, not
about which chunk a refitted ranker happens to put first on this synthetic paper."""


def anchor_settings(index_dir: Path) -> dict:
    weights = index_dir.parent / "anchor_ranker.json"
    weights.write_text(json.dumps(ANCHOR_RANKER), encoding="utf-8")
    return {"ranker_weights": str(weights), "document_order": "section-once-flat"}


def _ask(index_dir: Path, **settings):
    from pipeline import TreeRAG

    from evaluation.variants import VARIANTS

    rag = TreeRAG.open(index_dir, llm="mock", env={}, final_top_k=3, orderings=VARIANTS,
                       **{**anchor_settings(index_dir), **settings})
    return rag, rag.run(QUESTION)


def test_only_the_graph_channel_brings_both_facts_3000_chars_apart(hop_index: Path) -> None:
    text = multi_hop_paper()
    assert text.index(FACT_B) - (text.index(FACT_A) + len(FACT_A)) > 3000
    _, without = _ask(hop_index, kg_channel=False)
    _, with_graph = _ask(hop_index)

    def has(result, fact: str) -> bool:
        return any(fact[:40] in h.text for h in result.retrieve.hits)

    assert has(without, FACT_A) and not has(without, FACT_B)
    assert has(with_graph, FACT_A) and has(with_graph, FACT_B)
    hit = next(h for h in with_graph.retrieve.hits if FACT_B[:40] in h.text)
    assert hit.scores["graph_lifted"] == 1 and hit.scores["graph_score"] > 0
    used = with_graph.retrieve.graph[0]
    assert used.leaf == "0002" and "AdaRouter" in used.seeds
    assert hit.chunk_id in used.added
    assert any(p.head == "AdaRouter" and p.tail == "ZetaCorpus" for p in used.paths)
    assert without.retrieve.graph == [] and without.to_dict()["graph"] == []


def test_synthesis_prompt_carries_graph_paths_citing_evidence(hop_index: Path) -> None:
    from pipeline import Backends, run_pipeline
    from indexing.embedders.factory import make_embedder
    from indexing.index_store import load_index
    from utils.llm.types import LLMResponse, LLMUsage

    prompts: list[str] = []

    class Recorder:
        provider, model = "openai", "stub"

        def generate(self, prompt: str, **kw):
            prompts.append(prompt)
            return LLMResponse("AdaRouter was trained on ZetaCorpus [来源: 2 Setup].", LLMUsage(), "openai", "stub")

    index = load_index(hop_index)
    config = Config(final_top_k=3, locator="hybrid", context_budget_chars=1000)
    result = run_pipeline(QUESTION, index, config, Backends(make_embedder("hash", config), None, Recorder()))
    assert result.answer.mode == "llm"
    synthesis = prompts[-1]
    assert "<graph>" in synthesis and "AdaRouter -[" in synthesis
    graph_part = synthesis[synthesis.index("<graph>"):]
    assert "[证据" in graph_part or "(0002_chunk_" in graph_part  # every path cites what states it
    assert synthesis.index("<evidence") < synthesis.index("<graph>")  # next to the original text


def test_show_prints_the_subgraph(hop_index: Path, tmp_path: Path) -> None:
    log = tmp_path / "runs.sqlite3"
    r = run_cli("query", "--index", str(hop_index), "--query", QUESTION, "--mock", "--top-k", "3", "--json",
                env={"TREERAG_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run_id"]
    r = run_cli("show", run_id, env={"TREERAG_LOG": str(log)})
    assert ">>> Graph channel" in r.stdout and "AdaRouter -[" in r.stdout and "added to the leaf's candidates" in r.stdout


# ----------------------------------------------------------------------------- eval

def test_eval_pairs_kg_arms_with_their_plain_arm() -> None:
    from evaluation.arms import make_arm, parse_arms

    names = parse_arms("tree-hybrid,tree-hybrid+kg", with_llm=False)
    assert names == ["tree-hybrid", "tree-hybrid+kg"] or set(names) == {"tree-hybrid", "tree-hybrid+kg"}
    base = Config()
    assert make_arm("tree-hybrid", base, 10, paired_with_graph=True).config.kg_channel is False
    assert make_arm("tree-hybrid+kg", base.replace(kg_channel=False), 10).config.kg_channel is True
    assert make_arm("tree-hybrid+net+kg", base, 10).config.tuning.ranking.collection_order == "union-learned+net"
    with pytest.raises(Exception, match="unknown arm"):
        parse_arms("flat-hybrid+kg", with_llm=False)


def test_long_leaf_multi_slice() -> None:
    from evaluation.metrics import Relevance, question_slices

    class Table:
        def leaf_lengths(self, doc: str) -> dict[str, int]:
            return {"L1": 5000, "L2": 100}

    def rel(items):
        return Relevance(per_evidence=(), relevant=frozenset({1}), gold_leaves=frozenset(),
                         item_leaves=tuple(("d.md", frozenset(ids)) for ids in items))

    assert "long-leaf-multi" in question_slices(rel([{"L1"}, {"L1"}]), Table())
    assert "long-leaf-multi" not in question_slices(rel([{"L1"}, {"L2"}]), Table())
    assert "long-leaf" in question_slices(rel([{"L1"}, {"L2"}]), Table())


# ----------------------------------------------------------------------------- llm mode

def _kg_reply(prompt: str) -> str:
    """What a model might answer: fenced JSON with prose, an invented entity and a bad relation."""
    section = prompt.split("<section>")[1]
    ents = [{"name": "AdaRouter", "type": "entity"}, {"name": "ZetaCorpus", "type": "entity", "aliases": ["Zeta"]},
            {"name": "4.2 million sentences", "type": "quantity"}, {"name": "Quantum Flux", "type": "concept"}]
    rels = [{"head": "AdaRouter", "relation": "trained on", "tail": "ZetaCorpus"},
            {"head": "ZetaCorpus", "relation": "holds", "tail": "4.2 million sentences"},
            {"head": "AdaRouter", "relation": "uses", "tail": "Quantum Flux"}, {"head": 3}]
    present = [e for e in ents if e["name"] in section]
    return "Here is the graph:\n```json\n" + json.dumps({"entities": present, "relations": rels}) + "\n```"


def test_llm_extraction_windows_repairs_checks_and_falls_back() -> None:
    from indexing.kg_llm import LLMGraphExtractor, windows
    from indexing.kg_store import make_extractor
    from utils.llm.mock import MockLLM

    text = multi_hop_paper()
    chunks = [FACT_A] + FILLER + [FACT_B]
    assert windows(chunks, 1000)[0][0] == 0 and sum(len(w) for w in windows(chunks, 1000)) == len(chunks)
    config = Config().replace(kg_mode="llm", kg_llm_window_chars=1000)
    llm = MockLLM(lambda req: _kg_reply(req.prompt))
    rules, _ = make_extractor(config.replace(kg_mode="rules"))
    ext = LLMGraphExtractor(llm, config.tuning.graph, fallback=rules)
    g = ext.extract("0002", chunks, "2 Setup")
    assert g.mode == "llm" and g.llm_calls == len(windows(chunks, 1000)) == len(llm.requests)
    assert all(r.json_mode for r in llm.requests) and "2 Setup" in llm.requests[0].prompt
    names = {n.name: n for n in g.nodes}
    assert "Quantum Flux" not in names  # not in the text: dropped, and its relation with it
    assert names["ZetaCorpus"].chunks == [0, len(chunks) - 1]  # merged across windows
    trained = _edge(g, "AdaRouter", "ZetaCorpus")
    assert trained.relation == "trained on" and trained.chunks == [0]
    assert _edge(g, "ZetaCorpus", "4.2 million sentences").chunks == [len(chunks) - 1]
    assert text  # the fixture is the same paper the channel test uses

    # an unusable reply or a failed call: that leaf gets the rules graph, recorded as a fallback
    bad = LLMGraphExtractor(MockLLM(lambda req: "sorry, no JSON today"), config.tuning.graph, fallback=rules)
    g2 = bad.extract("0002", chunks)
    assert g2.mode == "rules" and g2.llm_calls == 1 and len(g2.nodes) > 0


def test_index_kg_llm_through_the_openai_wire_format(tmp_path: Path) -> None:
    from tests.stub_servers import StubResponse, StubServer, openai_chat_body

    def responder(req) -> StubResponse:
        prompt = req.json()["messages"][-1]["content"]
        return StubResponse(200, openai_chat_body(_kg_reply(prompt), prompt_tokens=700, completion_tokens=90))

    doc = tmp_path / "paper.md"
    doc.write_text(multi_hop_paper(), encoding="utf-8")
    env = {"TREERAG_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-test"}
    with StubServer(responder) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        r = run_cli("index", "--input", str(doc), "--output", str(tmp_path / "idx"), "--mock", "--kg", "llm",
                    "--llm", "openai:gpt-4o-mini", "--quiet", env=env)
        assert r.returncode == 0, r.stderr
        n = len(srv.requests)
        assert n >= 1 and srv.requests[0].json()["response_format"] == {"type": "json_object"}
        assert "graphs for 1 long leaves (> 3000 chars, llm)" in r.stdout
        assert f"{n} LLM calls, {n * 790} tokens" in r.stdout
        g = json.loads(run_cli("graph", "--index", str(tmp_path / "idx"), "--leaf", "0002", "--json").stdout)
        assert g["mode"] == "llm" and any(e["relation"] == "trained on" for e in g["edges"])
        # the channel works on an LLM graph too
        from evaluation.variants import VARIANTS
        from pipeline import TreeRAG

        res = TreeRAG.open(tmp_path / "idx", llm="mock", env={}, final_top_k=3, orderings=VARIANTS,
                           **anchor_settings(tmp_path / "idx")).run(QUESTION)
        assert any(FACT_B[:40] in h.text for h in res.retrieve.hits)
        # an update with nothing changed reuses the graph: no new request
        r = run_cli("index", "--input", str(doc), "--output", str(tmp_path / "idx"), "--mock", "--kg", "llm",
                    "--llm", "openai:gpt-4o-mini", "--quiet", env=env)
        assert r.returncode == 0 and len(srv.requests) == n and "0 extracted, 1 reused" in r.stdout
    # a dead server: the build still succeeds with rules graphs, and says so
    with StubServer(default=StubResponse(500, {"error": {"message": "boom"}},
                                         headers={"retry-after-ms": "1"})) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        r = run_cli("index", "--input", str(doc), "--output", str(tmp_path / "idx2"), "--mock", "--kg", "llm",
                    "--llm", "openai:gpt-4o-mini", "--quiet", "--no-cache", env=env)
    assert r.returncode == 0, r.stderr
    assert "1 fell back to rules" in r.stdout



def test_eval_reports_the_channel_against_its_absence(tmp_path: Path, hop_index: Path) -> None:
    data = tmp_path / "set"
    (data / "docs").mkdir(parents=True)
    (data / "docs" / "paper.md").write_text(multi_hop_paper(), encoding="utf-8")
    q = {"id": "q1", "query": QUESTION, "lang": "en", "scope": ["paper.md"],
         "evidence": [{"doc": "paper.md", "text": FACT_A}, {"doc": "paper.md", "text": FACT_B}], "answers": []}
    (data / "qa.jsonl").write_text(json.dumps(q) + "\n", encoding="utf-8")
    out = tmp_path / "run.json"
    r = run_cli("eval", "--data", str(data), "--index", str(hop_index), "--arms", "tree-hybrid,tree-hybrid+kg",
                "--k", "3", "--resamples", "200", "--quiet", "--cache-dir", str(tmp_path / "cache"),
                "--json", str(out), *(f"--set={k}={v}" for k, v in anchor_settings(tmp_path / "x").items()))
    assert r.returncode == 0, r.stderr
    assert "arm with the graph channel / the same arm without it" in r.stdout
    assert "graphs for 1 long leaves" in r.stdout  # the build cost line
    run = json.loads(out.read_text())
    assert run["arm_configs"]["tree-hybrid"]["kg_channel"] is False
    assert run["arm_configs"]["tree-hybrid+kg"]["kg_channel"] is True
    assert "long-leaf-multi" in run["questions"][0]["slices"]
    assert "tree-hybrid+kg" in run["slices"]["long-leaf-multi"]["vs_graph"]
    arms = run["questions"][0]["arms"]
    assert sum(h["relevant"] for h in arms["tree-hybrid+kg"]["retrieved"]) == 2
    assert sum(h["relevant"] for h in arms["tree-hybrid"]["retrieved"]) == 1


def test_llm_reply_cut_at_the_token_cap_keeps_its_complete_entries() -> None:
    """A CPU-served model's extraction reply runs into ``kg_llm_max_tokens`` and stops mid-entry;
    the entries written in full must survive (before, the repair found only the first entity
    object and the whole leaf fell back to the rules)."""
    from indexing.kg_llm import LLMGraphExtractor, close_truncated, parse_reply
    from indexing.kg_store import make_extractor
    from utils.llm.mock import MockLLM

    full = json.dumps({"entities": [{"name": "AdaRouter", "type": "entity"},
                                    {"name": "ZetaCorpus", "type": "entity", "aliases": ["Zeta"]}],
                       "relations": [{"head": "AdaRouter", "relation": "trained on", "tail": "ZetaCorpus"},
                                     {"head": "ZetaCorpus", "relation": "holds", "tail": "4.2 million sentences"}]},
                      indent=2)
    cut = full[:full.index('"holds"') + 3]  # as the model stopped: inside the second relation
    assert parse_reply(full) is not None and close_truncated(full) is None  # a closed object is not "cut"
    ents, rels = parse_reply(cut)
    assert [e["name"] for e in ents] == ["AdaRouter", "ZetaCorpus"]
    assert rels == [{"head": "AdaRouter", "relation": "trained on", "tail": "ZetaCorpus"}]
    # cut inside the entities list, in the middle of a string holding brackets and an escaped quote
    ents, rels = parse_reply('{"entities": [{"name": "A [x] \\"q\\" {y}", "type": "term"}, {"name": "B, C ]')
    assert [e["name"] for e in ents] == ['A [x] "q" {y}'] and rels == []
    assert parse_reply('{"entities": [{"name"') is None and parse_reply("no JSON") is None
    assert close_truncated('{"entities": [}') is None  # mismatched brackets are not repaired

    chunks = [FACT_A] + FILLER + [FACT_B]
    config = Config().replace(kg_mode="llm", kg_llm_window_chars=100_000, kg_llm_max_tokens=300)
    llm = MockLLM(lambda req: cut)
    rules, _ = make_extractor(config.replace(kg_mode="rules"))
    g = LLMGraphExtractor(llm, config.tuning.graph, fallback=rules).extract("0002", chunks, "2 Setup")
    assert g.mode == "llm" and llm.requests[0].max_tokens == 300  # the cap reaches the request
    assert _edge(g, "AdaRouter", "ZetaCorpus").relation == "trained on"
    ids = {LLMGraphExtractor(llm, c.tuning.graph, fallback=rules).extractor_id
           for c in (config, config.replace(kg_llm_max_tokens=600))}
    assert len(ids) == 2  # a different cap is a different extractor: graphs are not lent across it


def test_llm_relation_triples_make_their_own_nodes_and_clauses_are_not_names() -> None:
    """What the local model did with the entities-first prompt: a whole token cap of entities
    named by whole clauses and no relation. The prompt now asks for compact triples first; a
    triple's ends become nodes when the window's text names them, a clause is no name, and a
    placeholder copied from the prompt's example is not in the text."""
    from indexing.kg_llm import KG_PROMPT, LLMGraphExtractor, parse_reply
    from indexing.kg_store import make_extractor
    from utils.llm.mock import MockLLM

    assert KG_PROMPT.index('"relations"') < KG_PROMPT.index('"entities"')
    chunks = [FACT_A] + FILLER + [FACT_B]
    clause = " ".join(FACT_A.split()[:10])
    reply = json.dumps({"relations": [["AdaRouter", "trained on", "ZetaCorpus"],
                                      ["ZetaCorpus", "holds", "4.2 million sentences"],
                                      ["头实体", "关系", "尾实体"], [clause, "is", "AdaRouter"], ["only two"]],
                        "entities": [{"name": "ZetaCorpus", "type": "term"}]})
    assert len(parse_reply(reply)[1]) == 4  # the malformed triple is skipped
    config = Config().replace(kg_mode="llm", kg_llm_window_chars=100_000)
    rules, _ = make_extractor(config.replace(kg_mode="rules"))
    g = LLMGraphExtractor(MockLLM(lambda req: reply), config.tuning.graph, fallback=rules).extract("0002", chunks, "2 Setup")
    names = {n.name: n for n in g.nodes}
    assert g.mode == "llm" and set(names) == {"AdaRouter", "ZetaCorpus", "4.2 million sentences"}
    assert names["ZetaCorpus"].type == "term" and names["ZetaCorpus"].chunks == [0, len(chunks) - 1]
    assert _edge(g, "AdaRouter", "ZetaCorpus").relation == "trained on"
    assert _edge(g, "ZetaCorpus", "4.2 million sentences").chunks == [len(chunks) - 1]
    assert len(g.edges) == 2


def test_llm_reply_shaped_like_the_local_models_first_prompt_reply() -> None:
    """The shape the 1.5B model wrote to the entities-first prompt, on this fixture's text:
    indented JSON, entities only, one listed twice, clauses for names, cut at the token cap."""
    from indexing.kg_llm import LLMGraphExtractor
    from indexing.kg_store import make_extractor
    from utils.llm.mock import MockLLM

    clause = "The AdaRouter model was trained on the ZetaCorpus collection assembled by our group"
    reply = json.dumps({"entities": [{"name": "AdaRouter", "type": "entity"},
                                     {"name": clause, "type": "event"},
                                     {"name": clause, "type": "event"},
                                     {"name": "ZetaCorpus", "type": "concept"}]}, indent=2)
    reply = reply[:reply.rindex("]")] + ',\n    {\n      "name": "'  # the cap struck here
    chunks = [FACT_A] + FILLER + [FACT_B]
    config = Config().replace(kg_mode="llm", kg_llm_window_chars=100_000, kg_llm_max_tokens=384)
    rules, _ = make_extractor(config.replace(kg_mode="rules"))
    g = LLMGraphExtractor(MockLLM(lambda req: reply), config.tuning.graph, fallback=rules).extract("0002", chunks)
    assert g.mode == "llm"  # repaired, not thrown away (before: the leaf fell back to the rules)
    assert [n.name for n in g.nodes] == ["AdaRouter", "ZetaCorpus"]  # the clause is no name
    assert g.edges == []  # no relation before the cap: why the prompt now asks for triples first
