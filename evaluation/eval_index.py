"""The index an evaluation runs against: the one given (``--index``, checked against the set's
documents), else a cached build keyed by the documents and build settings, else a new build (of only
the documents a ``--limit`` sample is scoped to, when that suffices), seeded with the vectors of the
cached index that shares the most documents with it.

Why a module of its own: the runner asks questions of an index; finding, keying and building that
index is a separate job with its own cache folder (``<cache>/eval/indexes``).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Protocol

from config import Config
from evaluation.code_digest import closure_digest
from evaluation.dataset import EvalSet, Question
from indexing.index_store import Index, FORMAT_VERSION, load_index
from indexing.reuse import BUILD_FIELDS as INDEX_BUILD_FIELDS
from utils.errors import IndexFormatError, InputError
from utils.progress import make_progress
from utils.tokenizer import TOKENIZER_VERSION


BUILD_FIELDS = INDEX_BUILD_FIELDS + ("embedder", "embedder_model", "hash_dim")
"""Config fields that change what ``build_index`` writes (the index's own build settings, and the
embedder the evaluation chooses); only these key the cached index."""


class IndexOptions(Protocol):
    """What ``obtain_index`` reads of an evaluation's options (evaluation.runner.EvalOptions)."""

    index: Path | None
    embedder: str | None
    config: Config
    cache_root: Path | None
    rebuild: bool
    limit: int | None
    progress: bool
    notice: Callable[[str], None]


def digest(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON: the cache keys of indexes and results."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
                          .encode("utf-8")).hexdigest()


def default_cache_root() -> Path:
    """The CLI's one cache directory ($TREERAG_CACHE_DIR, else $XDG_CACHE_HOME/treerag or ~/.cache/treerag)."""
    from utils.llm.factory import default_cache_dir  # the LLM factory (SDK probing) only when no cache root is given

    return default_cache_dir(os.environ)


def structure_digest(doc: Any) -> str:
    """A digest of the headings a reader found in a document (PDF, Word, HTML; a Markdown file's
    are its text's) and of its title. Why: a document's content hash is of its text only, and a
    reader change that finds other headings (or other levels) in the same text makes another tree:
    a cached index keyed by the text alone would serve the old tree."""
    return digest([doc.title, [(h.text, h.marker_level, h.start_char) for h in doc.headings or ()]])[:20]


BUILDER_MODULE = "indexing.index_builder"
"""The module whose import closure (tree builder, chunker, indexes) makes an index from documents."""


def build_key(eval_set: EvalSet, config: Config, documents: list[str] | None = None) -> str:
    """The cached index's name: the documents it holds (all, or ``documents``: their text and the
    headings read in it), the build settings and the code that builds it. Why the code: a change to
    how the tree is cut from the same headings (or how leaves are chunked) makes another index from
    the same documents; a key of documents and settings alone served the old one. A rebuild borrows
    the vectors of unchanged chunk texts (``seed_from_earlier``), so it costs little embedding."""
    settings = {f: config.setting(f) for f in BUILD_FIELDS}
    wanted = None if documents is None else set(documents)
    docs = sorted((d.path, d.content_hash, structure_digest(d)) for d in eval_set.documents
                  if wanted is None or d.path in wanted)
    return digest({"docs": docs, "settings": settings, "format": FORMAT_VERSION,
                   "tokenizer": TOKENIZER_VERSION, "code": closure_digest(BUILDER_MODULE)})[:20]


def _docs_differ(index: Index, eval_set: EvalSet, documents: list[str] | None = None) -> list[str]:
    built = {d.get("path"): d.get("content_hash") for d in index.metadata.get("documents", [])}
    wanted = {d.path: d.content_hash for d in eval_set.documents if documents is None or d.path in documents}
    return sorted(p for p in set(built) | set(wanted) if built.get(p) != wanted.get(p))


def index_identity(index: Index) -> str:
    """Changes whenever the index is rebuilt or built differently."""
    meta = index.metadata
    return digest({"created_at": meta.get("created_at"), "documents": meta.get("documents"),
                 "config": meta.get("config"), "embedder": meta.get("embedder"),
                 "counts": meta.get("counts")})[:20]


def sample_documents(eval_set: EvalSet, questions: list[Question]) -> list[str] | None:
    """The documents a sample of questions is asked of, when every one is scoped and they are fewer
    than the set's; else None (a question over the whole collection needs every document).

    Scoped questions retrieve only inside their scope, so an index of those documents gives
    them the same candidates; only collection-wide statistics (BM25's IDF, the locator's term
    weights) are computed over fewer documents.
    """
    if not questions or any(not q.scope for q in questions):
        return None
    docs = sorted({d for q in questions for d in q.scope} | {e.doc for q in questions for e in q.evidence})
    known = {d.path for d in eval_set.documents}
    if len(docs) >= len(known) or not set(docs) <= known:
        return None
    return docs


def _stage_documents(eval_set: EvalSet, documents: list[str], staging: Path) -> Path:
    """Copy ``documents`` (paths relative to the set's docs/) into ``staging``; the folder to index."""
    shutil.rmtree(staging, ignore_errors=True)
    for rel in documents:
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(eval_set.docs_dir / rel, target)
    return staging


def obtain_index(eval_set: EvalSet, opts: IndexOptions,
                 questions: list[Question] | None = None) -> tuple[Index, dict[str, Any]]:
    """``--index`` (checked against the set's documents), else a cached build, else a new build.

    With ``--limit`` (``questions`` given) and no cached index of the whole set, only the
    documents the sampled questions are scoped to are indexed (``sample_documents``).
    """
    from indexing.embedders.factory import make_embedder  # the build stack only when the eval index is not cached
    from indexing.index_builder import build_index
    if opts.index is not None:
        index = load_index(Path(opts.index))
        differ = _docs_differ(index, eval_set)
        if differ:
            raise InputError(f"index {opts.index} was not built from {eval_set.docs_dir}: "
                             f"{len(differ)} document(s) differ (e.g. {differ[0]!r}); "
                             "rebuild it or drop --index")
        built_with = index.embedder_identity.get("name")
        if opts.embedder and opts.embedder != built_with:
            raise InputError(f"index {opts.index} was built with the {built_with!r} embedder, "
                             f"not {opts.embedder!r}; drop --embedder or --index")
        return index, {"path": str(index.path), "source": "given", "identity": index_identity(index)}

    config = opts.config.replace(embedder=opts.embedder or opts.config.embedder)
    root = opts.cache_root or default_cache_root()

    def cached(target: Path, documents: list[str] | None) -> Index | None:
        if opts.rebuild or not (target / "metadata.json").is_file():
            return None
        try:
            index = load_index(target)
        except IndexFormatError as exc:
            opts.notice(f"cached index unusable ({exc}); rebuilding")
            return None
        return None if _docs_differ(index, eval_set, documents) else index

    full = root / "eval" / "indexes" / build_key(eval_set, config)
    index = cached(full, None)
    if index is not None:
        return index, {"path": str(full), "source": "cached", "identity": index_identity(index)}
    subset = sample_documents(eval_set, questions) if questions is not None and opts.limit is not None else None
    target = full if subset is None else root / "eval" / "indexes" / build_key(eval_set, config, subset)
    if subset is not None:
        index = cached(target, subset)
        if index is not None:
            return index, {"path": str(target), "source": "cached", "identity": index_identity(index),
                           "documents": len(subset)}
        opts.notice(f"--limit: indexing only the {len(subset)} of {len(eval_set.documents)} documents "
                    "the sampled questions are scoped to")
    opts.notice(f"building the evaluation index ({config.embedder} embedder) at {target}")
    embedder = None if config.embedder == "auto" else make_embedder(config.embedder, config)
    source = eval_set.docs_dir
    staging = target.with_name(f".{target.name}.docs-{os.getpid()}")
    wanted = None if subset is None else set(subset)
    documents = [d for d in eval_set.documents if wanted is None or d.path in wanted]
    try:
        if subset is not None:
            source = _stage_documents(eval_set, subset, staging)
        lender = seed_from_earlier(target, documents, opts.rebuild, None if config.embedder == "auto" else config.embedder)
        if lender is not None:
            opts.notice(f"lending the vectors of {lender} (chunks of unchanged text are not embedded again)")
        report = build_index(source, target, config, embedder, documents=documents,
                             progress=make_progress(opts.progress, prefix="evaluation index: "))
    finally:
        if subset is not None:
            shutil.rmtree(staging, ignore_errors=True)
    opts.notice(report.summary_line())
    index = load_index(target)
    info = {"path": str(target), "source": "built", "identity": index_identity(index),
            "build_seconds": round(report.seconds, 2)}
    if subset is not None:
        info["documents"] = len(subset)
    return index, info


def seed_from_earlier(target: Path, documents: list[Any], rebuild: bool, embedder: str | None = None) -> Path | None:
    """Copy the cached evaluation index that shares the most documents with ``documents`` into the
    empty ``target``, so the build lends its vectors by text (indexing/reuse.py); the path copied, or
    None. An index built with ``embedder`` (its name) comes before any other: one of another embedder
    lends nothing, however many documents it shares.

    A reader change gives every PDF a new content hash, hence a new cache key and an empty folder:
    without a lender the whole set would be embedded again though most chunk texts are unchanged.
    The build checks the lender's settings itself (embedder, chunking): one that differs lends nothing.
    ``documents`` are handed to the build, which then rewrites the index rather than adding a
    delta, so nothing of the lender survives but vectors of identical texts.
    """
    if rebuild or target.exists():
        return None
    paths = {d.path for d in documents}
    best: tuple[bool, int, float, Path] | None = None
    for meta in target.parent.glob("*/metadata.json"):
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            docs = data.get("documents") or []
            shared = len(paths & {d.get("path") for d in docs if isinstance(d, dict)})
            built_with = (data.get("embedder") or {}).get("name")
            cand = (embedder is not None and built_with == embedder, shared, meta.stat().st_mtime, meta.parent)
        except (OSError, ValueError, AttributeError):
            continue
        if shared and (best is None or cand[:3] > best[:3]):
            best = cand
    if best is None:
        return None
    tmp = target.with_name(f".{target.name}.seed-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(best[3], tmp, ignore=shutil.ignore_patterns(".*"))
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    return best[3]
