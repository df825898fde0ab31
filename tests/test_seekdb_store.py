"""The seekdb store: an index whose records, vectors and full text live in the real engine.

Embedded seekdb (pylibseekdb) runs inside this process; it binds a process to one
database directory, so every embedded test here shares one (session fixture) and
tells its indexes apart by their table prefixes, as two indexes in one database do.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TEST_PAPER, run_cli

pytest.importorskip("pylibseekdb", reason="pyseekdb is in requirements.txt; the engine ships in its wheel")


@pytest.fixture(scope="session")
def seekdb_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"seekdb://{tmp_path_factory.mktemp('seekdb') / 'db'}"


def _build(docs: Path, out: Path, store: str | None):
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.seekdb.uri import parse_store_uri

    config = Config()
    return build_index(docs, out, config, make_embedder("hash", config),
                       store=parse_store_uri(store) if store else None)


def _tables(uri: str) -> set[str]:
    from indexing.seekdb.engine import Engine
    from indexing.seekdb.uri import parse_store_uri

    engine = Engine(parse_store_uri(uri))
    try:
        return {str(r[0]) for r in engine.rows("SHOW TABLES")}
    finally:
        engine.close()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, seekdb_uri: str):
    """The test paper indexed twice with the same settings: in files, and in the engine."""
    from indexing.index_store import load_index

    root = tmp_path_factory.mktemp("stores")
    _build(TEST_PAPER, root / "files", None)
    _build(TEST_PAPER, root / "engine", seekdb_uri)
    return load_index(root / "files"), load_index(root / "engine"), root


# --------------------------------------------------------------------------- URI


def test_store_uri_forms_and_the_password_never_shown() -> None:
    from indexing.seekdb.uri import PASSWORD_ENV, parse_store_uri
    from utils.errors import InputError

    emb = parse_store_uri("seekdb:///var/lib/treerag/db")
    assert emb.embedded and emb.path == "/var/lib/treerag/db" and emb.public() == "seekdb:///var/lib/treerag/db"
    srv = parse_store_uri("seekdb://alice:s3cr%40t@db.example:2881/rag?tenant=t1", env={})
    assert (srv.host, srv.port, srv.user, srv.password, srv.database, srv.tenant) == \
        ("db.example", 2881, "alice", "s3cr@t", "rag", "t1")
    assert "s3cr" not in srv.public() and "s3cr" not in repr(srv)
    from_env = parse_store_uri("seekdb://root@127.0.0.1:2882/treerag", env={PASSWORD_ENV: "pw"})
    assert from_env.password == "pw" and from_env.public() == "seekdb://root@127.0.0.1:2882/treerag"
    for bad in ("seekdb://relative/path", "seekdb:relative", "seekdb://root@host:notaport/db",
                "seekdb://host:2881/db", "seekdb://root@host:2881/bad-name!", "mysql://root@h:1/db",
                "seekdb:///", "seekdb://root@h:1/db?x=1"):
        with pytest.raises(InputError) as exc:
            parse_store_uri(bad, env={})
        assert "\n" not in str(exc.value) and "--store" in str(exc.value)


# --------------------------------------------------------------------------- build and read


def test_engine_index_keeps_only_a_manifest_and_no_secret(both) -> None:
    _, eng, root = both
    names = sorted(p.name for p in (root / "engine").iterdir())
    assert names == ["leaf_chunks.npy", "metadata.json", "node_table.npy", "node_toc_tokens.npy"]
    meta = json.loads((root / "engine" / "metadata.json").read_text())
    assert meta["store"]["uri"].startswith("seekdb:///") and meta["store"]["prefix"].startswith("treerag_")
    assert set(meta["files"]) == {"leaf_chunks.npy", "node_table.npy", "node_toc_tokens.npy"}
    assert eng.search.store == "seekdb"


def test_engine_returns_the_same_records_vectors_and_tree(both) -> None:
    files, eng, _ = both
    assert len(eng.chunks) == len(files.chunks) > 20
    for row in (0, 7, len(files.chunks) - 1):
        assert eng.chunks[row] == files.chunks[row]
    np.testing.assert_allclose(eng.embeddings[0:len(files.chunks)], np.asarray(files.embeddings), atol=1e-6)
    np.testing.assert_allclose(eng.leaf_embeddings[[0, 3]], np.asarray(files.leaf_embeddings[[0, 3]]), atol=1e-6)
    assert eng.text_keys["chunk_text_keys.npy"][2:5].tolist() == np.asarray(
        files.text_keys["chunk_text_keys.npy"][2:5]).tolist()
    assert [n.heading_path for n in eng.leaves] == [n.heading_path for n in files.leaves]
    assert [n.content for n in eng.leaves] == [n.content for n in files.leaves]


def test_in_leaf_and_document_scores_match_the_file_store(both) -> None:
    """A leaf and a document are scored exactly by metadata filters: the engine's inner products
    equal numpy's, and its full text matches exactly the chunks TreeRAG's BM25 matches."""
    from config import Config
    from indexing.search import ENGINE_RELEVANCE, Scope, ScoreParams, bm25_kind
    from indexing.embedders.factory import make_embedder
    from retrieval.query import Query

    files, eng, _ = both
    q = Query.build("contextual bandit router accuracy", make_embedder("hash", Config()))
    doc = files.leaves[0].doc_path
    scopes = [Scope.everything(), Scope.of_documents({doc}), Scope.of_documents({doc, "not-indexed.md"})]
    scopes += [Scope.of_leaf(j) for j in range(6) if files.leaf_ptr[j + 1] > files.leaf_ptr[j]]
    for scope in scopes:
        # corpus IDF: a word in every chunk of a small leaf gets IDF 0 there
        f = files.search.score(q, scope, "corpus", ScoreParams())
        e = eng.search.score(q, scope, "corpus", ScoreParams())
        assert e.rows.tolist() == f.rows.tolist() and e.complete and f.complete, scope
        np.testing.assert_allclose(e.dense, f.dense, atol=1e-5)
        assert (e.lexical > 0).tolist() == (f.lexical > 0).tolist()
        # what each lexical score is, said by the store: TreeRAG's BM25, or the engine's own relevance
        assert f.lexical_kind == bm25_kind("corpus") and e.lexical_kind == ENGINE_RELEVANCE
    assert len(files.search.score(q, Scope.of_documents({"not-indexed.md"}), "corpus", ScoreParams()).rows) == 0
    assert len(eng.search.score(q, Scope.of_documents({"not-indexed.md"}), "corpus", ScoreParams()).rows) == 0
    # candidates found earlier, re-scored: the same rows, dense equal, the same rows matched
    rows = np.array([5, 1, 9, 3], dtype=np.int64)
    f = files.search.rescore(q, rows, "document", ScoreParams())
    e = eng.search.rescore(q, rows, "document", ScoreParams())
    assert f.rows.tolist() == e.rows.tolist() == rows.tolist()
    np.testing.assert_allclose(e.dense, f.dense, atol=1e-5)
    np.testing.assert_allclose(e.dense, eng.search.dense(q.dense_vector, rows), atol=1e-6)
    assert (e.lexical > 0).tolist() == (f.lexical > 0).tolist()
    leaves = np.array([0, 3, 2])
    np.testing.assert_allclose(eng.search.leaf_dense(q, leaves, ScoreParams()),
                               files.search.leaf_dense(q, leaves, ScoreParams()), atol=1e-5)
    n, dfs = eng.search.term_stats(["bandit", "router", "nonexistentword"])
    assert (n, dfs) == files.search.term_stats(["bandit", "router", "nonexistentword"])
    assert eng.search.scripts() == files.search.scripts() == frozenset({"latin"})
    kw_f = files.search.leaf_keyword(["router", "design"], None, ScoreParams())
    kw_e = eng.search.leaf_keyword(["router", "design"], None, ScoreParams())
    assert (kw_e > 0).tolist() == (kw_f > 0).tolist() and kw_e.argmax() == kw_f.argmax()


def test_term_statistics_and_the_answers_bm25_match_the_file_store(both) -> None:
    """The extractive answer weighs its sentences' words with the store's counts: the engine counts
    every scope exactly as the postings do, so the answer's BM25 is the same on either store."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.search import Scope
    from retrieval.extractive import build_passages, score_sentences, split_sentences
    from retrieval.query import Query
    from retrieval.types import RetrievedChunk

    files, eng, _ = both
    words = ["bandit", "router", "accuracy", "the", "nonexistentword"]
    doc = files.leaves[0].doc_path
    scopes = [Scope.everything(), Scope.of_documents({doc}), Scope.of_documents({"not-indexed.md"})]
    scopes += [Scope.of_leaf(j) for j in range(len(files.leaf_ptr) - 1)]
    for scope in scopes:
        assert eng.search.term_stats(words, scope) == files.search.term_stats(words, scope), scope
    assert eng.search.document_counts(words) == files.search.document_counts(words)
    in_leaves = [files.search.term_stats(words, Scope.of_leaf(j))[0] for j in range(len(files.leaf_ptr) - 1)]
    assert sum(in_leaves) == files.search.term_stats(words)[0] and max(in_leaves) < sum(in_leaves)

    emb = make_embedder("hash", Config())
    q = Query.build("contextual bandit router accuracy", emb)
    scored = []
    for index in (files, eng):
        ranked = [RetrievedChunk(c, 1.0, {}, row=i) for i, c in enumerate(index.chunks[:10])]
        passages = build_passages(index, ranked)
        sentences = [s for i, p in enumerate(passages) for s in split_sentences(p, i, len(ranked))]
        score_sentences(sentences, passages, q, index, emb, Config())
        scored.append([s.bm25 for s in sentences])
    assert scored[0] == scored[1] and max(scored[0]) > 0


def test_the_spec_questions_find_the_same_sections(both) -> None:
    from config import Config
    from pipeline import make_backends, run_pipeline

    files, eng, _ = both
    config = Config()
    queries = [json.loads(line) for line in (TEST_PAPER.parent / "queries.jsonl").read_text().splitlines()]
    for q in queries:
        rf = run_pipeline(q["query"], files, config, make_backends(files, config, None))
        re_ = run_pipeline(q["query"], eng, config, make_backends(eng, config, None))
        # the engine's full-text relevance is not TreeRAG's BM25: sections may swap places, but the
        # evidence the answer gets is the same
        loc_f = {n.node_id for n in rf.locate.nodes[:3]}
        loc_e = {n.node_id for n in re_.locate.nodes[:3]}
        assert len(loc_f & loc_e) >= 2, q["id"]
        found = [[a for a in q["answer_contains"] if a in " ".join(p.text for p in r.context.passages)]
                 for r in (rf, re_)]
        assert found[1] == found[0] and found[0], q["id"]


def test_verify_reads_every_record_and_vector_from_the_engine(both) -> None:
    _, _, root = both
    r = run_cli("verify", "--index", str(root / "engine"))
    assert r.returncode == 0, r.stderr
    assert "chunk records" in r.stdout and "every vector is finite" in r.stdout


# --------------------------------------------------------------------------- updates and failures


def test_update_reuses_the_engines_vectors_and_drops_the_old_tables(tmp_path: Path, seekdb_uri: str) -> None:
    from indexing.index_store import load_index

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(TEST_PAPER.read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "b.md").write_text("# Notes\n\nThe zebrafish study measured 42 fins in total.\n", encoding="utf-8")
    out = tmp_path / "idx"
    _build(docs, out, seekdb_uri)
    old_prefix = json.loads((out / "metadata.json").read_text())["store"]["prefix"]
    (docs / "b.md").write_text("# Notes\n\nThe zebrafish study measured 43 fins in total.\n", encoding="utf-8")
    report = _build(docs, out, seekdb_uri)
    assert report.update is not None and report.update.changed == 1
    assert report.update.embedded_chunks == 1  # only the changed chunk was embedded
    new_prefix = json.loads((out / "metadata.json").read_text())["store"]["prefix"]
    tables = _tables(seekdb_uri)
    assert not any(t.startswith(old_prefix) for t in tables)
    assert {f"{new_prefix}_{t}" for t in ("chunks", "leaves", "nodes", "terms")} <= tables
    index = load_index(out)
    assert any("43 fins" in index.chunks[i].text for i in range(len(index.chunks)))


def test_a_failed_copy_leaves_the_previous_index_usable(tmp_path: Path, seekdb_uri: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from indexing.index_store import load_index
    from indexing.seekdb import publish as seekdb_publish
    from utils.errors import BackendError

    out = tmp_path / "idx"
    _build(TEST_PAPER, out, seekdb_uri)
    before = (out / "metadata.json").read_bytes()
    prefix = json.loads(before)["store"]["prefix"]
    tables_before = _tables(seekdb_uri)
    calls = {"n": 0}
    real = seekdb_publish.insert_rows

    def failing(engine, table, columns, values):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise BackendError("seekdb: connection lost (simulated)")
        return real(engine, table, columns, values)

    monkeypatch.setattr(seekdb_publish, "insert_rows", failing)
    with pytest.raises(BackendError, match="simulated"):
        _build(TEST_PAPER, out, seekdb_uri)
    monkeypatch.undo()
    assert (out / "metadata.json").read_bytes() == before
    assert _tables(seekdb_uri) == tables_before  # the half-copied tables are gone, the live ones kept
    index = load_index(out)
    assert index.metadata["store"]["prefix"] == prefix and len(index.chunks) > 0


def test_cli_index_and_query_on_the_engine(tmp_path: Path, seekdb_uri: str) -> None:
    out = tmp_path / "idx"
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--store", seekdb_uri)
    assert r.returncode == 0, r.stderr
    r = run_cli("query", "--index", str(out), "--mock", "--no-log", "--json", "--query",
                "What is AdaRouter's accuracy on EUR/USD?")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert "73.2%" in " ".join(c["text"] for c in d["step2_retrieved"])
    # an index over an engine index keeps the engine when --store is not given again
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock")
    assert r.returncode == 0 and "updated 1 document" in r.stdout
    assert json.loads((out / "metadata.json").read_text())["store"]["uri"] == seekdb_uri


def test_bad_store_and_missing_tables_are_one_line_errors(tmp_path: Path, seekdb_uri: str) -> None:
    from indexing.seekdb.engine import Engine
    from indexing.seekdb.schema import drop_tables
    from indexing.seekdb.uri import parse_store_uri

    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "x"), "--mock",
                "--store", "seekdb://nowhere")
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "--store" in r.stderr
    other = f"seekdb://{tmp_path / 'another-db'}"  # this process has its embedded database already
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "y"), "--mock", "--store", other)
    assert r.returncode != 0 and "one embedded database per process" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and not (tmp_path / "y").exists()
    out = tmp_path / "idx"
    _build(TEST_PAPER, out, seekdb_uri)
    engine = Engine(parse_store_uri(seekdb_uri))
    drop_tables(engine, json.loads((out / "metadata.json").read_text())["store"]["prefix"])
    engine.close()
    r = run_cli("query", "--index", str(out), "--mock", "--no-log", "--query", "What algorithm?")
    assert r.returncode != 0 and r.stderr.startswith("error: seekdb")
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr


# --------------------------------------------------------------------------- server


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def seekdb_server(tmp_path_factory: pytest.TempPathFactory):
    """The seekdb server binary shipped in the pylibseekdb wheel, on a free port with a temporary base
    directory; always stopped (SIGTERM, then SIGKILL) however the tests end."""
    import os
    import signal
    import subprocess
    import time

    import pylibseekdb

    binary = Path(pylibseekdb.__file__).parent / "seekdb"
    base = tmp_path_factory.mktemp("seekdb-server")
    port = _free_port()

    def cannot(why: str):  # CI must run this test; elsewhere a machine may lack what the server needs
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"seekdb server cannot start here: {why}")

    if not binary.is_file():
        cannot(f"{binary} is missing")
    log = open(base / "server.log", "wb")
    proc = subprocess.Popen(
        [str(binary), "--nodaemon", "--port", str(port), "--base-dir", str(base),
         "--parameter", "memory_budget=2G", "--parameter", "datafile_size=256M",
         "--parameter", "log_disk_size=2G", "--parameter", "cpu_count=2"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "TELEMETRY_ENABLED": "false"})
    try:
        import pymysql

        deadline, last = time.monotonic() + 120, ""
        while True:
            if proc.poll() is not None:
                cannot(f"exited with {proc.returncode}: {(base / 'server.log').read_text(errors='replace')[-300:]!r}")
            try:
                pymysql.connect(host="127.0.0.1", port=port, user="root@sys", password="", connect_timeout=2).close()
                break
            except pymysql.Error as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                cannot(f"no SQL login on 127.0.0.1:{port} within 120 s ({last})")
            time.sleep(0.5)
        yield f"seekdb://root@127.0.0.1:{port}/treerag_test"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        log.close()


def test_server_index_update_and_query(tmp_path: Path, seekdb_server: str) -> None:
    out = tmp_path / "idx"
    env = {"TREERAG_SEEKDB_PASSWORD": ""}
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--store", seekdb_server, env=env)
    assert r.returncode == 0, r.stderr
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["store"]["uri"] == seekdb_server
    r = run_cli("query", "--index", str(out), "--mock", "--no-log", "--json", "--query",
                "How many epochs was the model trained?", env=env)
    assert r.returncode == 0, r.stderr
    assert "50 epochs" in " ".join(p["text"] for p in json.loads(r.stdout)["context"]["passages"])
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", env=env)
    assert r.returncode == 0 and "re-embedded 0 chunks" in r.stdout
    assert _tables(seekdb_server) == {f"{json.loads((out / 'metadata.json').read_text())['store']['prefix']}_{t}"
                                      for t in ("chunks", "leaves", "nodes", "terms", "kg")}


def test_server_password_is_never_written(tmp_path: Path, seekdb_server: str) -> None:
    """A wrong password fails in one line naming the store without the password; nothing is written."""
    uri = seekdb_server.replace("root@", "root:wr0ngpass@")
    out = tmp_path / "idx"
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--store", uri)
    assert r.returncode != 0 and r.stderr.startswith("error: seekdb: cannot connect to ")
    assert "wr0ngpass" not in r.stderr and r.stderr.strip().count("\n") == 0
    assert not out.exists()


def test_large_tables_are_indexed_after_loading(tmp_path: Path, seekdb_uri: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Past DEFER_INDEX_ROWS the full-text and vector indexes are built once the rows are in;
    the index answers as one indexed row by row does."""
    from config import Config
    from indexing.seekdb import schema as seekdb_schema
    from indexing.embedders.factory import make_embedder
    from indexing.index_store import load_index
    from indexing.search import Scope, ScoreParams
    from retrieval.query import Query

    monkeypatch.setattr(seekdb_schema, "DEFER_INDEX_ROWS", 10)
    out = tmp_path / "idx"
    _build(TEST_PAPER, out, seekdb_uri)
    index = load_index(out)
    engine = index.search.engine  # type: ignore[attr-defined]
    for kind in ("chunks", "leaves"):
        keys = {str(r[2]) for r in engine.rows(f"SHOW INDEX FROM `{index.search.tables[kind]}`")}  # type: ignore[attr-defined]
        assert {"ft_body", "vi_emb"} <= keys, kind
    q = Query("training epochs", ("train", "epoch"), make_embedder("hash", Config()).embed_query("training epochs"))
    # exact_rows=8: the whole paper is a "large scope", scored from kNN + full-text candidates
    got = index.search.score(q, Scope.everything(), "corpus", ScoreParams(exact_rows=8, candidates=20))
    assert 0 < len(got.rows) <= len(index.chunks) and got.lexical.max() > 0 and not got.complete
    best = int(got.rows[int(np.argmax(got.lexical))])
    assert "epoch" in index.chunks[best].text.lower()


def test_insert_statements_stay_under_the_packet_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from indexing.seekdb.schema import INSERT_BYTES, INSERT_ROWS, insert_rows

    sent: list[tuple[str, list]] = []

    class Recorder:
        def run(self, sql: str, params: list) -> None:
            sent.append((sql, list(params)))

    big = "x" * (3 << 20)  # a long section text
    rows = [(i, big if i % 3 == 0 else "short") for i in range(10)] + [(i, "s") for i in range(10, 1300)]
    insert_rows(Recorder(), "t", ("a", "b"), rows)  # type: ignore[arg-type]
    assert all(sum(len(v) for v in params if isinstance(v, str)) <= INSERT_BYTES + len(big) for _, params in sent)
    assert all(sql.count("(%s,%s)") * 2 == len(params) for sql, params in sent)
    assert [tuple(p) for _, params in sent for p in zip(params[::2], params[1::2])] == rows  # every row once, in order
    assert max(len(params) // 2 for _, params in sent) <= INSERT_ROWS


def test_an_index_naming_a_missing_database_creates_nothing(both, tmp_path: Path) -> None:
    """An index may come from someone else: reading one never creates a database where it points."""
    import shutil

    _, _, root = both
    crafted = tmp_path / "crafted"
    shutil.copytree(root / "engine", crafted)
    target = tmp_path / "somewhere" / "db"
    meta = json.loads((crafted / "metadata.json").read_text())
    meta["store"]["uri"] = f"seekdb://{target}"
    (crafted / "metadata.json").write_text(json.dumps(meta))
    r = run_cli("query", "--index", str(crafted), "--mock", "--no-log", "--query", "What algorithm?")
    assert r.returncode != 0 and "no seekdb database at" in r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert not (tmp_path / "somewhere").exists()


def test_words_equal_under_a_loose_collation_stay_apart(tmp_path: Path, seekdb_uri: str) -> None:
    """The engine's default collation folds case and accents ('naive' = 'naïve'); TreeRAG's tokens do not."""
    from indexing.index_store import load_index

    doc = tmp_path / "d.md"
    doc.write_text("# Methods\n\nA naive baseline and a naïve one differ. Straße and strasse too.\n\n"
                   "# Results\n\nThe naïve baseline wins.\n", encoding="utf-8")
    _build(doc, tmp_path / "idx", seekdb_uri)
    files = _build(doc, tmp_path / "files", None)
    assert files.chunks > 0
    eng, ref = load_index(tmp_path / "idx"), load_index(tmp_path / "files")
    words = ["naive", "naïve", "straße", "strasse"]
    assert eng.search.term_stats(words) == ref.search.term_stats(words)
    from indexing.search import Scope

    one_doc = Scope.of_documents({ref.leaves[0].doc_path})
    assert eng.search.term_stats(words, one_doc) == ref.search.term_stats(words, one_doc)
    assert ref.search.term_stats(words, one_doc)[1]["naive"] == 1  # not folded into "naïve"
    assert eng.search.document_counts(words) == ref.search.document_counts(words)


def test_an_embedded_build_raises_the_engines_memory_budget_and_says_so(tmp_path: Path, seekdb_uri: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """pylibseekdb creates a database with a 1 GB budget; an index whose vector indexes need more
    raises it (once, persisted) instead of failing mid-copy with code 4013; it is never lowered."""
    from indexing.seekdb import publish as seekdb_publish
    from indexing.seekdb.engine import Engine
    from indexing.seekdb.schema import GIB, parse_capacity
    from indexing.seekdb.uri import parse_store_uri

    def budget() -> int:
        engine = Engine(parse_store_uri(seekdb_uri))
        try:
            return parse_capacity(str(engine.rows("SHOW PARAMETERS LIKE 'memory_budget'")[0][3]))
        finally:
            engine.close()

    before = budget()
    monkeypatch.setattr(seekdb_publish, "memory_budget_needed", lambda rows, dim, kind="hnsw": before + 1)
    report = _build(TEST_PAPER, tmp_path / "big", seekdb_uri)
    assert budget() == before + GIB
    assert len(report.notes) == 1 and "memory budget" in report.notes[0]
    assert "note" not in json.loads((tmp_path / "big" / "metadata.json").read_text())["store"]
    monkeypatch.setattr(seekdb_publish, "memory_budget_needed", lambda rows, dim, kind="hnsw": GIB)
    report = _build(TEST_PAPER, tmp_path / "small", seekdb_uri)
    assert budget() == before + GIB and report.notes == []


def test_capacities_and_the_out_of_memory_hint() -> None:
    from indexing.seekdb.engine import _hint
    from indexing.seekdb.schema import GIB, parse_capacity

    assert parse_capacity("1G") == GIB and parse_capacity("512M") == GIB // 2 and parse_capacity("0M") == 0
    assert parse_capacity("lots") == 0
    assert "memory_budget" in _hint("No memory or server runtime memory limit reached failed: code=4013")
    assert _hint("Table doesn't exist failed: code=1146") == ""


def test_copy_batches_are_formatted_ahead_in_order_and_errors_surface() -> None:
    from indexing.seekdb.publish import prepared

    def make(a: int, b: int) -> list[str]:
        return [str(i) for i in range(a, b)]

    got = list(prepared(make, 10, step=4))
    assert [c for c, _ in got] == [4, 4, 2] and sum((v for _, v in got), []) == [str(i) for i in range(10)]
    assert list(prepared(make, 0, step=4)) == []
    assert list(prepared(make, 3, step=4)) == [(3, ["0", "1", "2"])]

    def broken(a: int, b: int) -> list[str]:
        if a >= 4:
            raise ValueError("bad row")
        return make(a, b)

    with pytest.raises(ValueError, match="bad row"):
        list(prepared(broken, 10, step=4))


def test_whole_collection_knn_searches_a_beam_twice_the_candidates(both) -> None:
    """The engine's default HNSW beam is the LIMIT: too narrow for 1,000 candidates of a large
    collection; the search asks for twice as wide, once per connection."""
    from indexing.search import Scope, ScoreParams
    from retrieval.query import Query

    _, engine_index, _ = both
    search = engine_index.search
    q = Query("train", ("train",), np.ones(engine_index.embeddings.shape[1], dtype=np.float32))
    search.score(q, Scope.everything(), "corpus", ScoreParams(exact_rows=1, candidates=37))
    assert search.engine.rows("SELECT @@ob_hnsw_ef_search")[0][0] == 74
    search.engine.close()  # a new connection starts from the engine's default and is set again
    search.score(q, Scope.everything(), "corpus", ScoreParams(exact_rows=1, candidates=37))
    assert search.engine.rows("SELECT @@ob_hnsw_ef_search")[0][0] == 74


def test_a_replaced_index_whose_tables_stay_locked_is_dropped_by_the_next_build(
        tmp_path: Path, seekdb_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DROP that waits on a lock is bounded: the build finishes, says so, records the tables in
    metadata.json, and the next build drops them. The lock here is a real one: an open transaction
    that updated a row of the old index's terms table."""
    import pylibseekdb

    from indexing.seekdb import publish as seekdb_publish
    from indexing.seekdb.uri import EMBEDDED_DATABASE

    out = tmp_path / "idx"
    _build(TEST_PAPER, out, seekdb_uri)
    old = json.loads((out / "metadata.json").read_text())["store"]["prefix"]
    holder = pylibseekdb.connect(database=EMBEDDED_DATABASE, autocommit=False)
    cur = holder.cursor()
    cur.execute("BEGIN")
    cur.execute(f"UPDATE `{old}_terms` SET df = df + 1 LIMIT 1")
    monkeypatch.setattr(seekdb_publish, "DROP_TIMEOUT_S", 2.0)
    try:
        report = _build(TEST_PAPER, out, seekdb_uri)
    finally:
        cur.execute("ROLLBACK")
        holder.close()
    meta = json.loads((out / "metadata.json").read_text())
    assert [e["prefix"] for e in meta["retired_tables"]] == [old]
    assert any(old in n for n in report.notes)
    assert f"{old}_terms" in _tables(seekdb_uri)
    from indexing.index_store import load_index

    assert len(load_index(out).chunks) > 0  # the new index is whole and readable meanwhile
    report = _build(TEST_PAPER, out, seekdb_uri)
    assert not any(t.startswith(old) for t in _tables(seekdb_uri))
    assert "retired_tables" not in json.loads((out / "metadata.json").read_text()) and report.notes == []


def test_long_leaf_graphs_live_in_the_engine_too(tmp_path: Path, seekdb_uri: str) -> None:
    """The kg table holds the graph records; the manifest directory keeps kg_leaves.npy."""
    from tests.test_kg import FACT_B, _ask, multi_hop_paper
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index, verify_index
    from indexing.seekdb.uri import parse_store_uri

    doc = tmp_path / "paper.md"
    doc.write_text(multi_hop_paper(), encoding="utf-8")
    config = Config(kg_mode="rules")
    store = parse_store_uri(seekdb_uri)
    out = tmp_path / "engine"
    report = build_index(doc, out, config, make_embedder("hash", config), store=store)
    assert report.kg.graphs == 1
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("kg_")) == ["kg_leaves.npy"]
    build_index(doc, tmp_path / "files", config, make_embedder("hash", config))
    engine, files = load_index(out), load_index(tmp_path / "files")
    assert engine.kg.for_leaf("0002").to_record() == files.kg.for_leaf("0002").to_record()
    assert verify_index(out).graphs.graphs == 1
    _, res = _ask(out)
    assert any(FACT_B[:40] in h.text for h in res.retrieve.hits)
    again = build_index(doc, out, config, make_embedder("hash", config), store=store)
    assert (again.kg.extracted, again.kg.reused) == (0, 1)


# --------------------------------------------------------------------------- values through driver parameters

HOSTILE = ["it's", 'say "hi"', "back\\slash \\' \\\\", "'; DROP TABLE treerag; --", "第三章 合同的履行",
           "100% %s %(x)s", "nul\x00byte", "tab\tnew\nline", "emoji \U0001F600", "\\x00 \\n"]
"""Values that break SQL built by hand: quotes, backslashes, format markers, NUL, CJK, astral characters."""


def _hostile_folder(root: Path) -> Path:
    """Documents whose file names, headings and text hold the hostile values (NUL aside: a file
    holding one is refused as binary, and no file name can)."""
    docs = root / "docs"
    docs.mkdir()
    names = ["it's \"quoted\" \\ back.md", "第三章'; DROP TABLE t; --.md", "100% %s.md"]
    for i, name in enumerate(names):
        body = [f"# Title {i}: {HOSTILE[i]} '\" \\"]
        for j, value in enumerate(v for v in HOSTILE if "\x00" not in v):
            body.append(f"\n## Section {j} {value}\n\nThe contract says {value} and the router's "
                        f"\"accuracy\" is 10\\% better; 当事人应当按照约定全面履行自己的义务 {value}.\n")
        (docs / name).write_text("\n".join(body), encoding="utf-8")
    return docs


@pytest.mark.parametrize("store", ["seekdb_uri", "seekdb_server"])
def test_hostile_text_headings_and_paths_are_stored_and_read_back_byte_identical(
        store: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Every record, section text and term the engine holds equals the file store's, character for
    character, in the embedded engine and in the server: values reach SQL only as driver parameters."""
    from indexing.index_store import load_index

    uri = request.getfixturevalue(store)
    docs = _hostile_folder(tmp_path)
    _build(docs, tmp_path / "files", None)
    _build(docs, tmp_path / "engine", uri)
    files, eng = load_index(tmp_path / "files"), load_index(tmp_path / "engine")
    assert sorted(d["path"] for d in eng.metadata["documents"]) == sorted(p.name for p in docs.iterdir())
    assert len(eng.chunks) == len(files.chunks) > 20
    assert [eng.chunks[i] for i in range(len(files.chunks))] == [files.chunks[i] for i in range(len(files.chunks))]
    rows = range(len(files.tree))
    assert [eng.tree.records.raw(r) for r in rows] == [files.tree.records.raw(r) for r in rows]
    assert [eng.tree.contents.raw(r) for r in rows] == [files.tree.contents.raw(r) for r in rows]
    assert {n.doc_path for n in eng.leaves} == {p.name for p in docs.iterdir()}
    text = " ".join(eng.chunks[i].text for i in range(len(eng.chunks)))
    assert all(v in text for v in HOSTILE if "\x00" not in v and "\t" not in v and "\n" not in v)
    bm = files.search.bm25  # type: ignore[attr-defined]
    terms = [t for t in bm.terms if any(c in t for c in "'\"\\%") or not t.isascii()]
    assert terms  # the hostile words are terms of the index
    search = eng.search
    got = dict(search.engine.rows(  # type: ignore[attr-defined]
        f"SELECT term, df FROM `{search.tables['terms']}` WHERE term IN ({','.join(['%s'] * len(terms))})",  # type: ignore[attr-defined]
        terms))
    df = np.diff(np.asarray(bm.indptr))
    assert got == {t: int(df[bm.terms.index(t)]) for t in terms}


@pytest.mark.parametrize("store", ["seekdb_uri", "seekdb_server"])
def test_hostile_values_and_nul_round_trip_through_the_engine(store: str, request: pytest.FixtureRequest) -> None:
    """The bare round trip, NUL included: rows written by insert_rows and read by EngineRecords."""
    from indexing.seekdb.engine import Engine
    from indexing.seekdb.rows import EngineRecords
    from indexing.seekdb.schema import drop_tables, insert_rows, table_names
    from indexing.seekdb.uri import parse_store_uri

    engine = Engine(parse_store_uri(request.getfixturevalue(store)), create=True)
    prefix = "treerag_" + "0123456789abcdef"
    table = table_names(prefix)["nodes"]
    try:
        engine.run(f"DROP TABLE IF EXISTS `{table}`")
        engine.run(f"CREATE TABLE `{table}` (row_id BIGINT PRIMARY KEY, record LONGTEXT NOT NULL, "
                   "content LONGTEXT NOT NULL)")
        insert_rows(engine, table, ("row_id", "record", "content"), [(i, v, v[::-1]) for i, v in enumerate(HOSTILE)])
        records = EngineRecords(engine, table, "record", len(HOSTILE), as_json=False)
        contents = EngineRecords(engine, table, "content", len(HOSTILE), as_json=False)
        assert [records.raw(i) for i in range(len(HOSTILE))] == HOSTILE
        assert [contents.raw(i) for i in range(len(HOSTILE))] == [v[::-1] for v in HOSTILE]
        assert [engine.rows("SELECT %s", [v])[0][0] for v in HOSTILE] == HOSTILE
        assert engine.rows(f"SELECT row_id FROM `{table}` WHERE record = %s", ["'; DROP TABLE treerag; --"]) == [(3,)]
        assert engine.rows("SELECT '100%'") == [("100%",)]  # no parameters: the text is sent as it is
    finally:
        drop_tables(engine, prefix)
        engine.close()


def test_table_names_and_identifiers_are_checked_where_they_are_made() -> None:
    from indexing.seekdb.sql import identifier, placeholders
    from indexing.seekdb.schema import table_names

    assert table_names("treerag_0123456789abcdef")["chunks"] == "treerag_0123456789abcdef_chunks"
    for bad in ("treerag_x; DROP TABLE t", "treerag_0123456789ABCDEF", "other_0123456789abcdef", "treerag_`"):
        with pytest.raises(ValueError, match="identifier"):
            table_names(bad)
    assert identifier("treerag") == "`treerag`"
    for bad in ("a`b", "a b", "", "x" * 65, "1abc"):
        with pytest.raises(ValueError):
            identifier(bad)
    assert placeholders(3) == "%s,%s,%s" and placeholders(2, 3) == "(%s,%s,%s),(%s,%s,%s)"


def _statements(monkeypatch: pytest.MonkeyPatch, engine) -> list[str]:
    """The SQL statements ``engine`` runs from now on (the statement text, values apart)."""
    seen: list[str] = []
    real = engine.rows

    def rows(sql, params=None):
        seen.append(sql)
        return real(sql, params)

    monkeypatch.setattr(engine, "rows", rows)
    return seen


@pytest.mark.parametrize("parallel", [False, True])
def test_one_statement_scores_equal_the_separate_statements(both, monkeypatch: pytest.MonkeyPatch,
                                                             parallel: bool) -> None:
    """A whole collection is scored from the kNN and full-text scans, each candidate's inner product
    computed in the scan: one UNION ALL, or the two scans at once on two connections; a leaf or
    document by one statement computing both scores. Rows and values are exactly those of the former
    separate statements (kNN ids, full-text top, then the inner products of their union read by row id;
    a filtered full-text scan)."""
    import copy

    from indexing.search import Scope, ScoreParams
    from indexing.seekdb.sql import fulltext_query, vector_text
    from indexing.embedders.factory import make_embedder
    from config import Config
    from retrieval.query import Query

    _, eng, _ = both
    search = copy.copy(eng.search)
    if not parallel:
        search.side = search.ahead = None
    table = search.tables["chunks"]
    emb = make_embedder("hash", Config())
    probes = [Query.build("contextual bandit router accuracy", emb), Query.build("zzzunknownword", emb),
              Query("router", ("router",), None)]
    for q in probes:
        for k in (7, 40):
            params = ScoreParams(exact_rows=1, candidates=k)
            seen = _statements(monkeypatch, search.engine)
            side = _statements(monkeypatch, search.side) if search.side is not None else []
            got = search.score(q, Scope.everything(), "corpus", params)
            monkeypatch.undo()
            sent = [s for s in seen + side if not s.startswith("SET ")]
            both_scans = q.vector is not None and fulltext_query(q.tokens) is not None
            assert len(sent) == (2 if parallel and both_scans else 1)
            assert ("UNION ALL" in sent[0]) == (both_scans and not parallel)
            cand: set[int] = set()
            if q.vector is not None:
                cand.update(int(r[0]) for r in search.engine.rows(
                    f"SELECT row_id FROM `{table}` ORDER BY cosine_distance(emb, %s) APPROXIMATE LIMIT %s",
                    [vector_text(q.vector), k]))
            bm = search._fulltext(q.tokens, None, k)
            cand.update(bm)
            rows = np.array(sorted(cand), dtype=np.int64)
            assert got.rows.tolist() == rows.tolist() and not got.complete
            if q.vector is not None:  # a full-text candidate's exactly; a kNN one's from the index's distance
                want = search.dense(q.vector, rows)
                assert got.dense == pytest.approx(want, abs=2e-7, rel=0)
                fulltext = np.isin(rows, np.array(sorted(bm), dtype=np.int64))
                assert got.dense[fulltext].tolist() == want[fulltext].tolist()
            assert got.lexical.tolist() == np.array([bm.get(int(r), 0.0) for r in rows], dtype=np.float32).tolist()
        for leaf in range(min(6, len(eng.leaf_ptr) - 1)):
            a, b = int(eng.leaf_ptr[leaf]), int(eng.leaf_ptr[leaf + 1])
            if b == a:
                continue
            seen = _statements(monkeypatch, search.engine)
            got = search.score(q, Scope.of_leaf(leaf), "corpus", ScoreParams())
            monkeypatch.undo()
            assert len(seen) == 1 and got.rows.tolist() == list(range(a, b))
            where = ("leaf = %s", [leaf])
            if q.vector is not None:
                dense = search._dense(q.vector, where)
                assert got.dense.tolist() == np.array([dense[r] for r in range(a, b)], dtype=np.float32).tolist()
            bm = search._fulltext(q.tokens, where)
            assert got.lexical.tolist() == np.array([bm.get(r, 0.0) for r in range(a, b)], dtype=np.float32).tolist()
        # candidates found earlier, re-scored by row id (repeats kept): one statement, the same values
        rows = np.array([5, 1, 9, 3, 5], dtype=np.int64)
        seen = _statements(monkeypatch, search.engine)
        got = search.rescore(q, rows, "document", ScoreParams())
        monkeypatch.undo()
        assert len(seen) == 1 and got.rows.tolist() == rows.tolist()
        if q.vector is not None:
            assert got.dense.tolist() == search.dense(q.vector, rows).tolist()
        bm = search._fulltext(q.tokens, ("row_id IN (%s,%s,%s,%s)", [1, 3, 5, 9]))
        assert got.lexical.tolist() == np.array([bm.get(int(r), 0.0) for r in rows], dtype=np.float32).tolist()


def test_leaf_and_document_term_counts_are_one_engine_statement(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer step's document-scope counts come back as one row from the engine, not as the
    document's chunk bodies; bytes are compared, so a word is not counted under another's spelling."""
    from indexing.search import Scope

    files, eng, _ = both
    docs = sorted({leaf.doc_path for leaf in files.leaves})
    words = ["bandit", "router", "Router", "routér", "the", "a b", "", "nonexistentword"]
    seen = _statements(monkeypatch, eng.search.engine)
    got = eng.search.term_stats(words, Scope.of_documents(set(docs)))
    monkeypatch.undo()
    assert len(seen) == 1 and "body FROM" not in seen[0]
    assert got == files.search.term_stats(words, Scope.of_documents(set(docs)))
    assert "Router" not in got[1] and "routér" not in got[1] and got[1]["router"] > 0


def test_a_section_text_is_read_from_the_engine_once(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """A question reads its leaves' texts tens of times (passages, quotes, line numbers): each is one
    SQL round trip on an engine, so a text once read is kept, within a bound."""
    import indexing.node_table as node_table

    files, eng, _ = both
    leaf = eng.leaves[1]
    seen = _statements(monkeypatch, eng.search.engine)
    texts = [leaf.content for _ in range(5)]
    assert texts == [files.leaves[1].content] * 5 and len([s for s in seen if "content FROM" in s]) <= 1
    monkeypatch.setattr(node_table, "CONTENT_CACHE_CHARS", len(eng.leaves[2].content) + 1)
    eng.tree._texts.clear()
    eng.tree._text_chars = 0
    for j in (2, 3):
        eng.leaves[j]  # the node records: read once, kept with the node
    before = len(seen)
    for j in (2, 3, 2, 2):
        assert eng.leaves[j].content == files.leaves[j].content
    assert len(seen) - before == 3  # leaf 3 pushed leaf 2 out once; then it is kept again
    assert eng.tree._text_chars <= node_table.CONTENT_CACHE_CHARS


def test_the_records_a_question_reads_come_in_batches(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranking a scope reads its top chunks' records in one statement (their leaves' in another), the
    locator its candidate leaves' node records in one; what comes back equals the file store's records."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.search import Scope, ScoreParams
    from retrieval.candidates import StageHits, rank_scored
    from retrieval.query import Query

    files, eng, root = both
    from indexing.index_store import load_index

    eng = load_index(root / "engine")  # nothing read yet
    q = Query.build("contextual bandit router accuracy", make_embedder("hash", Config()))
    scores = eng.search.score(q, Scope.everything(), "corpus", ScoreParams())
    seen = _statements(monkeypatch, eng.search.engine)
    got = rank_scored(eng, scores, 5, Config().tuning.ranking.fused, q.text, "flat", StageHits())
    eng.prefetch_leaves([0, 2, 3, 5])
    leaves = [eng.leaves[j] for j in (0, 2, 3, 5)]
    monkeypatch.undo()
    nodes, chunks = (f"SELECT row_id, record FROM `{eng.search.tables[t]}`" for t in ("nodes", "chunks"))
    # the chunks' leaves (a chunk is checked against its leaf), the chunks, the other leaves asked for
    assert [s.split(" WHERE ")[0] for s in seen] == [nodes, chunks, nodes]
    assert [rc.chunk for rc in got] == [files.chunks[rc.row] for rc in got]
    assert [n.heading_path for n in leaves] == [files.leaves[j].heading_path for j in (0, 2, 3, 5)]
    eng.search.engine.close()


def test_long_cjk_words_in_computed_columns_are_read_back(both) -> None:
    """A question's words travel inside computed columns (relevance, word counts); a column the SQL
    leaves unnamed is named by its text, cut at 256 bytes, possibly inside a CJK character, which the
    driver then failed to decode: every such column is named."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.search import Scope, ScoreParams
    from retrieval.query import Query

    files, eng, _ = both
    words = ["履行合同义务" * 30, "合同" * 60, "bandit"]
    doc = files.leaves[0].doc_path
    assert eng.search.term_stats(words, Scope.of_documents({doc})) == files.search.term_stats(
        words, Scope.of_documents({doc}))
    q = Query("合同 bandit", tuple(words), make_embedder("hash", Config()).embed_query("合同 bandit"))
    assert len(eng.search.score(q, Scope.of_leaf(1), "corpus", ScoreParams()).rows)
    for params in (ScoreParams(), ScoreParams(exact_rows=1)):  # every row exactly; the candidates
        assert (eng.search.score(q, Scope.everything(), "corpus", params).lexical > 0).any()
    assert len(eng.search.rescore(q, np.array([0, 1, 2]), "document", ScoreParams()).rows) == 3


def _probe_with_common_and_rare_words(eng):
    """A question holding the test paper's most common word and a rare one, with their chunk counts."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from retrieval.query import Query

    search = eng.search
    terms = search.engine.rows(f"SELECT term, df FROM `{search.tables['terms']}` ORDER BY df DESC, term")
    common, df_common = str(terms[0][0]), int(terms[0][1])
    rare, df_rare = next((str(t), int(d)) for t, d in terms if 3 <= int(d) <= 10)
    assert df_common > 0.3 * search.n_chunks  # the paper has a word in most chunks
    vec = make_embedder("hash", Config()).embed_query(f"{common} {rare}")
    return Query(f"{common} {rare}", (common, rare), vec), common, rare


def test_the_fulltext_scan_leaves_out_the_collections_most_common_words(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``fulltext_max_share`` below a word's share of the chunks, the full-text candidates are the
    chunks best for the rarer words; each candidate's relevance is still the engine's relevance of
    every word (equal to a filtered scan's of the whole question); the kNN side is unchanged."""
    from indexing.search import Scope, ScoreParams
    from indexing.seekdb.sql import vector_text

    _, eng, _ = both
    search = eng.search
    q, common, rare = _probe_with_common_and_rare_words(eng)
    table = search.tables["chunks"]
    k = 4
    exact = search.score(q, Scope.everything(), "corpus", ScoreParams(exact_rows=1, candidates=k))
    seen = _statements(monkeypatch, search.side)
    narrow = search.score(q, Scope.everything(), "corpus",
                          ScoreParams(exact_rows=1, candidates=k, fulltext_max_share=0.3))
    monkeypatch.undo()
    assert any("MATCH(body) AGAINST(%s) AS o" in s for s in seen)
    knn = {int(r[0]) for r in search.engine.rows(
        f"SELECT row_id FROM `{table}` ORDER BY cosine_distance(emb, %s) APPROXIMATE LIMIT %s",
        [vector_text(q.vector), k])}
    best_rare = search._fulltext([rare], None, k)
    assert narrow.rows.tolist() == sorted(knn | set(best_rare))
    everywhere = search._fulltext(q.tokens, ("row_id IN (%s)" % ",".join(["%s"] * len(narrow.rows)),
                                             narrow.rows.tolist()))
    lexical = dict(zip(narrow.rows.tolist(), narrow.lexical.tolist()))
    for r in best_rare:
        assert lexical[r] == pytest.approx(everywhere[r], rel=1e-6) and everywhere[r] > best_rare[r]
    # 1 (the default of ScoreParams) searches every word: the exact candidates
    again = search.score(q, Scope.everything(), "corpus", ScoreParams(exact_rows=1, candidates=k, fulltext_max_share=1))
    assert again.rows.tolist() == exact.rows.tolist() and again.lexical.tolist() == exact.lexical.tolist()


def test_the_narrowed_scan_adds_the_other_words_relevance_to_its_own_and_scores_as_before(
        both, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's relevance of every word is the searched words' (which the scan computes) plus the
    others': the narrowed scan asks MATCH only for the words it left out, and returns the rows and the
    float32 relevances that asking for every word returned (the statement this replaced, run here)."""
    from indexing.search import Scope, ScoreParams
    from indexing.seekdb.search import rest_relevance
    from indexing.seekdb.sql import fulltext_query

    assert rest_relevance("a b c d", "b d") == "a c" and rest_relevance("x y", "y") == "x"
    _, eng, _ = both
    search = eng.search
    q, common, rare = _probe_with_common_and_rare_words(eng)
    k = 4
    seen: list[tuple[str, tuple]] = []
    real = search.side.rows
    monkeypatch.setattr(search.side, "rows", lambda sql, params=None: seen.append((sql, tuple(params or ()))) or real(sql, params))
    narrow = search.score(q, Scope.everything(), "corpus", ScoreParams(exact_rows=1, candidates=k, fulltext_max_share=0.3))
    monkeypatch.undo()
    (sql, params), = [(s_, p_) for s_, p_ in seen if "AS o" in s_]
    every = fulltext_query(q.tokens)
    assert "r + o" in sql and every not in params and common in params and rare in params
    before = search.engine.rows(
        f"SELECT row_id, MATCH(body) AGAINST(%s) AS s, MATCH(body) AGAINST(%s) AS o FROM `{search.tables['chunks']}` "
        "WHERE MATCH(body) AGAINST(%s) ORDER BY o DESC LIMIT %s", [every, rare, rare, k])
    lexical = dict(zip(narrow.rows.tolist(), narrow.lexical.tolist()))
    assert before and all(int(r) in lexical for r, _, _ in before)
    for r, s_all, _ in before:
        assert lexical[int(r)] == float(np.float32(float(s_all)))


def test_the_scan_keeps_the_rarest_word_when_every_word_is_common(both) -> None:
    _, eng, _ = both
    search = eng.search
    terms = search.engine.rows(f"SELECT term, df FROM `{search.tables['terms']}` ORDER BY df DESC, term LIMIT 2")
    (a, df_a), (b, df_b) = ((str(t), int(d)) for t, d in terms)
    assert search._scan_words([a, b], 0.0) == [b if df_b < df_a else a]
    assert search._scan_words([a, b], 1.0) == [a, b]
    assert search._scan_words([a, "zzzunknownword"], 0.0) == ["zzzunknownword"]  # found nowhere: the rarest


def test_a_whole_collection_question_starts_its_leaf_knn_ahead(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring the whole collection starts the leaves' kNN on a third connection; the locator's
    ``leaf_dense`` then takes its result, equal to asking for it on demand, without a statement of its own."""
    import copy

    from indexing.search import Scope, ScoreParams
    from indexing.seekdb.search import LEAVES_AHEAD

    _, eng, _ = both
    q, _, _ = _probe_with_common_and_rare_words(eng)
    params = ScoreParams(exact_rows=1, candidates=5)
    ahead = copy.copy(eng.search)
    ahead.score(q, Scope.everything(), "corpus", params)
    assert q.memo.get((LEAVES_AHEAD, 5)) is not None
    seen = _statements(monkeypatch, ahead.engine)
    got = ahead.leaf_dense(q, None, params)
    monkeypatch.undo()
    assert seen == []
    on_demand = copy.copy(eng.search)
    on_demand.side = on_demand.ahead = None
    q2, _, _ = _probe_with_common_and_rare_words(eng)
    on_demand.score(q2, Scope.everything(), "corpus", params)
    assert q2.memo.get((LEAVES_AHEAD, 5)) is None
    want = on_demand.leaf_dense(q2, None, params)
    assert got.tolist() == want.tolist() and 0 < int((got != 0).sum()) <= 5


def test_opening_an_embedded_index_makes_room_for_its_vector_indexes(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that built an index on a smaller budget could not load its HNSW indexes back (code
    7604): opening an embedded index raises the budget to what its vectors need, never lowers it."""
    from indexing.index_store import load_index
    from indexing.seekdb import schema
    from indexing.seekdb.engine import _hint

    _, eng, root = both

    def budget() -> int:
        return schema.parse_capacity(str(eng.search.engine.rows("SHOW PARAMETERS LIKE 'memory_budget'")[0][3]))

    before = budget()
    monkeypatch.setattr(schema, "memory_budget_needed", lambda rows, dim, kind="hnsw": before + 1)
    load_index(root / "engine")
    assert budget() == before + schema.GIB
    monkeypatch.setattr(schema, "memory_budget_needed", lambda rows, dim, kind="hnsw": schema.GIB)
    load_index(root / "engine")
    assert budget() == before + schema.GIB
    assert "memory budget" in _hint("(7604, 'Using the vsag interface returns an error')")


def test_the_knns_inner_products_come_from_the_vector_indexs_distances(both) -> None:
    """A kNN's inner products are ``(1 - cosine distance) * |q|`` from the index (no table reads): within
    2e-7 of the engine's ``inner_product`` for every leaf and chunk the kNN returns; a zero vector, which
    the engine gives no distance, has inner product 0."""
    from indexing.search import Scope, ScoreParams
    from indexing.seekdb.search import inner_products

    _, eng, _ = both
    search = eng.search
    q, _, _ = _probe_with_common_and_rare_words(eng)
    params = ScoreParams(exact_rows=1, candidates=12)
    near = search._knn(q.vector, "leaves", "leaf", 12)
    leaves = np.array(sorted(near), dtype=np.int64)
    assert len(leaves) == min(12, search.n_leaves)
    exact = search.leaf_dense(q, leaves, params)  # read by leaf id: the engine's inner_product
    assert np.array([near[int(j)] for j in leaves]) == pytest.approx(exact, abs=2e-7, rel=0)
    chunks = search._knn(q.vector, "chunks", "row_id", 12)
    rows = np.array(sorted(chunks), dtype=np.int64)
    assert np.array([chunks[int(r)] for r in rows]) == pytest.approx(search.dense(q.vector, rows), abs=2e-7, rel=0)
    whole = search.score(q, Scope.everything(), "corpus", params)
    assert whole.dense == pytest.approx(search.dense(q.vector, whole.rows), abs=2e-7, rel=0)
    doc = sorted(eng.doc_rows)[0]  # a document past exact_rows: the filtered kNN and full-text scans
    start, end = eng.doc_rows[doc]
    part = search.score(q, Scope.of_documents({doc}), "corpus", params)
    assert len(part.rows) and all(start <= r < end for r in part.rows.tolist())
    assert part.dense == pytest.approx(search.dense(q.vector, part.rows), abs=2e-7, rel=0)
    assert inner_products([None, 0.25, 1.0, 2.0], 2 * q.vector) == pytest.approx([0.0, 1.5, 0.0, -2.0])
    zero = search.engine.rows("SELECT cosine_distance(emb, %s) FROM `%s` LIMIT 1" % ("%s", search.tables["leaves"]),
                              ["[" + ",".join(["0"] * len(q.vector)) + "]"])
    assert zero[0][0] is None  # what inner_products reads as 0


def test_packed_candidates_keep_zero_vectors_and_a_cut_result_is_an_error(seekdb_uri: str) -> None:
    """A scan's rows come back packed in one row: a zero vector (no distance: NULL) keeps its row with
    inner product 0, the numbers read back are the driver's own, and a result the engine cut short
    (group_concat_max_len) is an error, never fewer candidates."""
    from indexing.seekdb.engine import Engine
    from indexing.seekdb.search import KNN_DISTANCE, inner_products, pack_sql, unpack
    from indexing.seekdb.uri import parse_store_uri
    from utils.errors import IndexFormatError

    engine = Engine(parse_store_uri(seekdb_uri), create=True)
    try:
        engine.run("DROP TABLE IF EXISTS pack_probe")
        engine.run("CREATE TABLE pack_probe (row_id INT PRIMARY KEY, emb VECTOR(3) NOT NULL, "
                   "VECTOR INDEX vi (emb) WITH (distance=cosine, type=hnsw, lib=vsag))")
        engine.run("INSERT INTO pack_probe VALUES (1, '[1,0,0]'), (2, '[0,0,0]'), (3, '[0,0.6,0.8]'), (4, '[0.6,0.8,0]')")
        q = np.array([0.6, 0.8, 0.0], dtype=np.float32)
        knn = ("SELECT row_id, cosine_distance(emb, %s) AS d FROM pack_probe "
               "ORDER BY cosine_distance(emb, %s) APPROXIMATE LIMIT %s")
        engine.set_session("group_concat_max_len", 1 << 20)
        (k, n, text), = engine.rows(pack_sql(knn, ["row_id", KNN_DISTANCE], 1), ["[0.6,0.8,0]", "[0.6,0.8,0]", 4])
        got = unpack(n, text, 2, "probe")
        ips = dict(zip((int(r) for r, _ in got), inner_products([d for _, d in got], q)))
        assert int(k) == 1 and ips == pytest.approx({1: 0.6, 2: 0.0, 3: 0.48, 4: 1.0}, abs=2e-7)
        plain = "SELECT row_id, inner_product(emb, %s) AS d FROM pack_probe"
        (_, n, text), = engine.rows(pack_sql(plain, ["row_id", "d"], 0), ["[0.6,0.8,0]"])
        rows = engine.rows(plain, ["[0.6,0.8,0]"])
        assert {int(r): float(d) for r, d in unpack(n, text, 2, "probe")} == {int(r): float(d) for r, d in rows}
        (_, n, text), = engine.rows(pack_sql(plain + " WHERE row_id > 9", ["row_id", "d"], 0), ["[0.6,0.8,0]"])
        assert unpack(n, text, 2, "probe") == []
        engine.set_session("group_concat_max_len", 8)  # the engine cuts the packed text at 8 bytes
        (_, n, text), = engine.rows(pack_sql(plain, ["row_id", "d"], 0), ["[0.6,0.8,0]"])
        with pytest.raises(IndexFormatError, match="cut"):
            unpack(n, text, 2, "probe")
        engine.run("DROP TABLE pack_probe")
    finally:
        engine.close()


@pytest.mark.parametrize("defer", [False, True])
def test_the_vector_index_type_and_insert_sessions_are_the_builds_settings(tmp_path: Path, seekdb_uri: str, both,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           defer: bool) -> None:
    """store_vector_index names the engine's index type (created with the table, or after the rows
    are in for a large table); store_copy_sessions inserts on several connections; the manifest
    records the type, and the index answers as the default build does (scores are exact either way)."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from indexing.search import Scope, ScoreParams
    from indexing.seekdb import schema
    from indexing.seekdb.uri import parse_store_uri
    from retrieval.query import Query

    if defer:
        monkeypatch.setattr(schema, "DEFER_INDEX_ROWS", 0)
    config = Config().replace(store_vector_index="hnsw_sq", store_copy_sessions=3)
    build_index(TEST_PAPER, tmp_path / "sq", config, make_embedder("hash", config), store=parse_store_uri(seekdb_uri))
    meta = json.loads((tmp_path / "sq" / "metadata.json").read_text())
    assert meta["store"]["vector_index"] == "hnsw_sq"
    sq = load_index(tmp_path / "sq")
    for table in ("chunks", "leaves"):
        ddl = str(sq.search.engine.rows(f"SHOW CREATE TABLE `{sq.search.tables[table]}`")[0][1]).lower()
        assert "type=hnsw_sq" in ddl.replace(" ", "")
    files, eng, _ = both
    assert [sq.chunks[i] for i in range(len(files.chunks))] == [files.chunks[i] for i in range(len(files.chunks))]
    q = Query.build("contextual bandit router accuracy", make_embedder("hash", config))
    for params in (ScoreParams(), ScoreParams(exact_rows=1)):
        a = sq.search.score(q, Scope.everything(), "corpus", params)
        b = eng.search.score(q, Scope.everything(), "corpus", params)
        assert sorted(a.rows.tolist()) == sorted(b.rows.tolist())
        assert np.allclose(a.dense[np.argsort(a.rows)], b.dense[np.argsort(b.rows)], atol=1e-6)
    sq.search.engine.close()


def test_a_vector_index_type_the_engine_does_not_know_never_reaches_sql() -> None:
    from indexing.seekdb.schema import GIB, memory_budget_needed, vector_with

    assert "TYPE=hnsw_bq" in vector_with("hnsw_bq")
    with pytest.raises(ValueError):
        vector_with("hnsw) ; DROP TABLE x; --")
    # a quantised index needs about a third of the float index's memory at 384 dimensions
    assert memory_budget_needed(10**6, 384, "hnsw_sq") - GIB < (memory_budget_needed(10**6, 384) - GIB) / 2


def test_a_questions_section_texts_are_read_in_batches(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """The paragraph order of a question's pool and its context read the section texts of their hits'
    leaves in one statement each (a whole-collection question read ~29 texts one by one); the texts
    are the file store's."""
    from config import Config
    from indexing.index_store import load_index
    from pipeline import make_backends, run_pipeline

    files, _, root = both
    eng = load_index(root / "engine")  # nothing read yet
    ids = [eng.leaves[j].node_id for j in (0, 2, 3, 5)]
    seen = _statements(monkeypatch, eng.search.engine)
    eng.prefetch_contents(ids + ids[:1])
    texts = [eng.get_node(i).content for i in ids]
    reads = [s for s in seen if "content FROM" in s]
    assert len(reads) == 1 and reads[0].startswith("SELECT row_id, content FROM")
    assert texts == [files.get_node(i).content for i in ids]
    monkeypatch.undo()

    eng = load_index(root / "engine")
    config = Config()
    backends = make_backends(eng, config, None)
    seen = _statements(monkeypatch, eng.search.engine)
    record = run_pipeline("contextual bandit router accuracy", eng, config, backends)
    assert record.context.passages
    assert sum("content FROM" in s for s in seen) <= 2
    eng.search.engine.close()


def test_the_answer_steps_word_counts_of_several_documents_are_one_statement(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """term_stats_many counts every document's (and leaf's) rows in one statement and returns what
    term_stats returns scope by scope, the file store's counts; the whole collection comes from the
    terms table as before."""
    from indexing.search import Scope

    files, eng, _ = both
    docs = sorted(files.doc_rows)
    words = ["bandit", "router", "the", "accuracy", "合同", "no-such-word-here", "a b"]
    scopes = [Scope.of_documents([d]) for d in docs] + [Scope.of_leaf(0), Scope.of_leaf(3), Scope.everything(),
                                                        Scope.of_documents(docs)]
    seen = _statements(monkeypatch, eng.search.engine)
    got = eng.search.term_stats_many(words, scopes)
    monkeypatch.undo()
    assert sum(" UNION ALL " in s for s in seen) == 1 and len(seen) == 2  # the terms table for everything
    assert got == [eng.search.term_stats(words, s) for s in scopes]
    assert got == [files.search.term_stats(words, s) for s in scopes]
    assert eng.search.term_stats_many(words, []) == []


# --------------------------------------------------------------------------- warming at open


def test_what_auto_warming_means_for_each_engine_and_process() -> None:
    from indexing.seekdb.warm import resolve_level

    assert resolve_level("auto", embedded=True, long_running=True) == "tables"
    assert resolve_level("auto", embedded=True, long_running=False) == "indexes"  # a one-shot query
    assert resolve_level("auto", embedded=False, long_running=True) == "indexes"  # a server's cache is its own
    for level in ("off", "indexes", "tables"):
        assert resolve_level(level, embedded=True, long_running=False) == level
        assert resolve_level(level, embedded=False, long_running=True) == level


def test_warming_loads_the_indexes_reads_the_tables_and_changes_no_score(both) -> None:
    """Warming runs every step on connections of its own and ends; a whole-collection question after it
    scores exactly as one on a search that never warmed."""
    import copy

    from indexing.search import Scope, ScoreParams

    _, eng, _ = both
    params = ScoreParams(exact_rows=1, candidates=5)
    cold = copy.copy(eng.search)
    q, _, _ = _probe_with_common_and_rare_words(eng)
    want = cold.score(q, Scope.everything(), "corpus", params)
    warm = copy.copy(eng.search)
    warm.warmer = None
    warm.warm("tables")
    assert warm.warmer is not None and warm.warmer.join(120)
    assert warm.warmer.report.error is None
    assert set(warm.warmer.report.seconds) == {"chunks index", "leaves index", "chunks table", "leaves table"}
    first = warm.warmer
    warm.warm("tables")  # once per search
    assert warm.warmer is first
    q2, _, _ = _probe_with_common_and_rare_words(eng)
    got = warm.score(q2, Scope.everything(), "corpus", params)
    assert got.rows.tolist() == want.rows.tolist()
    assert got.dense.tolist() == want.dense.tolist() and got.lexical.tolist() == want.lexical.tolist()
    only_indexes = copy.copy(eng.search)
    only_indexes.warmer = None
    only_indexes.warm("auto", long_running=False)  # an embedded one-shot query: the indexes only
    assert only_indexes.warmer is not None and only_indexes.warmer.join(120)
    assert set(only_indexes.warmer.report.seconds) == {"chunks index", "leaves index"}
    off = copy.copy(eng.search)
    off.warmer = None
    off.warm("off", long_running=True)
    assert off.warmer is None


def test_a_questions_knn_waits_for_the_index_load_warming_started(both, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two kNN searches reaching an index while it loads each load it (twice the engine's work): the
    question's kNN is sent only once warming has loaded that table's index; its full-text scan is not held."""
    import copy
    import threading

    from indexing.search import Scope, ScoreParams
    from indexing.seekdb.warm import Warmer

    _, eng, _ = both
    search = copy.copy(eng.search)
    held = Warmer(search.engine.uri, search.tables, search.dim, read_tables=False)
    held._threads = [threading.Thread(target=lambda: None)]  # a load under way that has not finished
    search.warmer = held
    seen = _statements(monkeypatch, search.engine)
    q, _, _ = _probe_with_common_and_rare_words(eng)
    done: list[object] = []
    asker = threading.Thread(target=lambda: done.append(search.score(q, Scope.everything(), "corpus",
                                                                     ScoreParams(exact_rows=1, candidates=5))))
    asker.start()
    asker.join(1.0)
    assert asker.is_alive() and not any("APPROXIMATE" in s for s in seen)
    held._loaded["chunks"].set()
    held._loaded["leaves"].set()
    asker.join(60)
    assert not asker.is_alive() and done and any("APPROXIMATE" in s for s in seen)


def test_a_warming_failure_is_kept_and_never_holds_a_question(both) -> None:
    from indexing.seekdb.warm import Warmer

    _, eng, _ = both
    broken = Warmer(eng.search.engine.uri, {"chunks": "treerag_0000000000000000_chunks",
                                            "leaves": "treerag_0000000000000000_leaves"},
                    eng.search.dim, read_tables=True)
    broken.start()
    assert broken.join(60)
    assert broken.report.error and "doesn't exist" in broken.report.error
    broken.wait_index("chunks")  # returns: the load ended, in failure
    broken.wait_index("leaves")
    assert broken.report.seconds.keys() == {"chunks index", "leaves index"}


def test_opening_backends_starts_the_stores_warming_with_the_configured_level(both, monkeypatch: pytest.MonkeyPatch) -> None:
    from config import Config
    from pipeline import make_backends

    files, eng, _ = both
    asked: list[tuple[str, bool]] = []
    monkeypatch.setattr(type(eng.search), "warm", lambda self, level, long_running=False: asked.append((level, long_running)))
    make_backends(eng, Config(), None)
    make_backends(eng, Config(store_prewarm="tables"), None, long_running=True)
    assert asked == [("auto", False), ("tables", True)]
    files.search.warm("tables", long_running=True)  # the file store has nothing to warm


def test_a_one_shot_query_warms_the_indexes_unless_scoped_and_interactive_reads_the_tables(both) -> None:
    """``query`` loads the vector indexes (its whole-collection question needs them); a question scoped
    to documents is scored by filters, so nothing is loaded beside it; a long-running session reads the
    tables too."""
    import main

    _, eng, root = both
    doc = eng.metadata["documents"][0]["path"]

    def session(*extra: str, long_running: bool = False):
        args = main.build_parser().parse_args(["query", "--index", str(root / "engine"), "--query", "x",
                                               "--mock", "--no-log", *extra])
        return main.Session(args, long_running=long_running)

    one_shot = session()
    assert one_shot.index.search.warmer is not None and one_shot.index.search.warmer.join(120)
    assert set(one_shot.index.search.warmer.report.seconds) == {"chunks index", "leaves index"}
    scoped = session("--doc", doc)
    assert scoped.rag.config.store_prewarm == "off" and scoped.index.search.warmer is None
    long_running = session(long_running=True)
    assert long_running.index.search.warmer is not None and long_running.index.search.warmer.join(120)
    assert "chunks table" in long_running.index.search.warmer.report.seconds


def test_a_named_statement_leads_on_the_engine_as_in_files(tmp_path: Path, seekdb_uri: str) -> None:
    """The statement a question names is located and leads the card-led flat ranking on either store:
    the section titles and the cards come from the engine's tables there."""
    import numpy as np

    from config import Config
    from indexing.index_store import load_index
    from pipeline import make_backends, run_pipeline
    from retrieval.candidates import flat_lead
    from retrieval.query import Query
    from tests.test_named_sections import QUESTION, filing

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(filing(2022), encoding="utf-8")
    (docs / "b.md").write_text(filing(2021), encoding="utf-8")
    _build(docs, tmp_path / "files", None)
    _build(docs, tmp_path / "engine", seekdb_uri)
    files, eng = load_index(tmp_path / "files"), load_index(tmp_path / "engine")
    config = Config()
    leads = []
    for index in (files, eng):
        rec = run_pipeline(QUESTION, index, config, make_backends(index, config, None))
        located = [(index.nodes[n.node_id].doc_path, index.nodes[n.node_id].heading) for n in rec.locate.nodes]
        assert ("a.md", "Consolidated Statements of Financial Position") in located
        rows = np.arange(len(index.chunks))
        leads.append(flat_lead(index, Query.build(QUESTION, None), rows, None).tolist())
    assert leads[0] == leads[1] and max(leads[0]) > 10  # the named filing (cards) and its statement
