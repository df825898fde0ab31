"""Step 3 without an LLM: the sentences of the evidence that answer the question.

The retrieved chunks are overlapping windows of leaf sections, and a window
starts and ends wherever the chunker cut it. Quoting them as they are repeats
text and starts mid-sentence. Here they are turned back into the original
text first:

1. chunks of one leaf whose character spans overlap or touch (only whitespace
   between) are merged into one passage, read from the leaf's own content
   (``doc_text[content_start:content_end]``), and widened to the enclosing
   sentence boundaries (not the assembled context's passages: they are read
   as they are, so that a quote never reaches outside the context);
2. each passage is split into sentences (the chunker's sentence ends, blank
   lines, and line breaks before list items, table rows and headings);
3. every sentence is scored against the question with the retrieval's own
   signals: dense cosine with the index's embedder and BM25 with the index's
   IDF (the configured scope), fused the way retrieval fuses;
4. the best sentences, within a character budget, become quotes, best first;
   a quote is a run of consecutive chosen sentences of one passage, keeps the
   citation of its own span and the step-2 numbers of the chunks it came from.

Whether the evidence answers the question at all is decided separately
(``evidence_strength``) against ``Config.evidence_floor``.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from utils.cjk import has_cjk
from config import Config
from indexing.chunker import SENTENCE_END  # one definition of a sentence end
from indexing.chunker import Chunk
from indexing.index_store import Index
from indexing.search import Scope
from retrieval.doc_cards import card_match, confirmed, name_spread
from retrieval.derived_figures import Measure, asked_measure, derive, prints_measure
from retrieval.figure_rows import Figure, asked_periods, asks_quantity, figures_in, states_figure_for
from retrieval.named_sections import titled_as
from indexing.search_params import Bm25Params
from retrieval.scoring import fuse
from retrieval.types import AnswerParams, RetrievedChunk
from retrieval.query import Query
from utils.idf import okapi
from utils.similarity import min_max_normalize
from utils.tokenizer import tokenize

#: Paragraph breaks, and single line breaks that start a list item, table row, quote or heading.
_LINE_BREAK = re.compile(r"\n[ \t]*\n\s*|\n(?=[ \t]*(?:[-*+•]\s|\d{1,3}[.)、]\s|\||#|>))")
#: How much a figure row's evidence rank counts beside its label match (rank 1 adds this, the last 0).
FIGURE_PRIOR_WEIGHT = 0.2
#: Added to the score of a sentence that states a figure and names the period a question asks about.
FIGURE_SENTENCE_BONUS = 0.25
#: Taken off the score of a label fragment (``is_label_fragment``) when the question asks for a quantity.
LABEL_FRAGMENT_PENALTY = 0.15
#: A "sentence" of fewer words than this, with no figure and no sentence end, is a label, not a statement.
LABEL_FRAGMENT_WORDS = 6
#: A document whose card matches the question at least this share of the best match is one it names.
NAMED_SHARE = 0.5
#: How far a passage may be widened to reach a sentence boundary (characters, each side).
MAX_WIDEN = 400


class DocumentEmbedder(Protocol):
    def embed_documents(self, texts: list[str], progress: Any = None) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass
class Passage:
    """Merged, sentence-aligned text of one leaf around retrieved chunks."""

    chunk: Chunk
    """A chunk of the passage's leaf: carries doc path, heading path (and page fields) for citations."""
    start: int
    end: int
    text: str
    """``doc_text[start:end]``."""
    ranks: list[tuple[int, int, int]]
    """(step-2 rank, chunk start, chunk end) of the retrieved chunks inside the passage."""
    line_anchor: tuple[int, int]
    """(char offset, its 1-based line): lines of any offset in the passage are counted from here."""
    content: str | None = None
    content_start: int = 0


@dataclass
class Sentence:
    passage: int
    start: int
    end: int
    text: str
    dense: float = 0.0
    bm25: float = 0.0
    prior: float = 0.0
    """Step-2 standing of the best retrieved chunk the sentence lies in: 1 for #1 down to 1/k for #k."""
    score: float = 0.0


@dataclass
class Quote:
    text: str
    chunk: Chunk
    """A copy of a chunk of the quote's leaf with the quote's own span, text and lines (for ``citation``)."""
    ranks: list[int]
    """Step-2 numbers of the retrieved chunks the quote overlaps."""
    score: float
    """Fused score of the quote's best sentence."""
    dense: float
    """Raw dense cosine of the quote's best sentence with the question."""
    best_span: tuple[int, int] = (0, 0)
    """Document span of the quote's best sentence (what the measurements score)."""
    article: str | None = None
    """The statute article (``第十条``) the quote lies in when the quote does not begin with it: a
    quote from an article's second paragraph is cited by its article, as a lawyer cites it."""
    read: str | None = None
    """For a figure read from a table row: which row and column(s) (``row 'Total revenues', column '2022'``)."""
    label: str | None = None
    """For a figure: the label of the row it was read from (or the measure computed)."""


@dataclass
class Extract:
    quotes: list[Quote] = field(default_factory=list)
    sentences: int = 0
    """Candidate sentences scored."""


# --------------------------------------------------------------------------- passages

def leaf_text(index: Index | None, chunk: Chunk) -> tuple[str, int] | None:
    """(content, content_start) of the chunk's leaf when it really holds the chunk's span."""
    node = index.get_node(chunk.source_node_id) if index is not None else None
    if node is None:
        return None
    a, b = chunk.start_char - node.content_start, chunk.end_char - node.content_start
    if a < 0 or b > len(node.content) or node.content[a:b] != chunk.text:
        return None
    return node.content, node.content_start


def continued_sections(index: Index | None, leaf: str) -> list[str]:
    """``leaf`` and the leaves right after it in its document under the same heading: a statement
    whose next page the reader made a section of its own ("Consolidated Balance Sheets" twice, assets
    and then liabilities and equity)."""
    out = [leaf]
    rows = index.leaf_rows.get(leaf) if index is not None else None
    if index is None or rows is None or rows[1] <= rows[0]:
        return out
    first = index.chunks[rows[0]]
    while rows is not None and rows[1] < len(index.chunks):
        after = index.chunks[rows[1]]
        if after.doc_path != first.doc_path or after.heading_path != first.heading_path:
            break
        out.append(after.source_node_id)
        rows = index.leaf_rows.get(after.source_node_id)
    return out


HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
"""An HTML comment in a Markdown source: an author's note to themselves, never part of an answer."""

QUOTE_SENTENCE_END = re.compile(SENTENCE_END.pattern.replace("；", ""))
"""A sentence end for quotes: as the chunker's, but "；" does not end a quote. In a statute "；" joins
an article's clauses, which are read and cited together up to the "。"."""

ARTICLE_START = re.compile(r"(?m)^[ \t\u3000]*(第[零一二三四五六七八九十百千万〇两0-9０-９]+条(?:之[一二三四五六七八九十]+)?)")
"""The number a statute article starts with, at a line start (``第十条``, ``第一百零二条之一``)."""


def blank_comments(text: str) -> str:
    """``text`` with HTML comments blanked out character for character (newlines kept): sentence
    bounds and scores ignore them while every offset stays that of the document."""
    return HTML_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def without_comments(text: str) -> str:
    """``text`` with HTML comments removed: what a quote shows (its offsets cite the document)."""
    return HTML_COMMENT.sub("", text)


def article_of(p: "Passage", offset: int) -> str | None:
    """The statute article (``第十条``) whose text holds document offset ``offset`` of passage ``p``:
    the last article start before it in the leaf (or the passage when the leaf is not known)."""
    text, rel = (p.content, offset - p.content_start) if p.content is not None else (p.text, offset - p.start)
    found = None
    for m in ARTICLE_START.finditer(text, 0, max(rel, 0) + 40):  # an article starting at offset counts
        if m.start() > rel:
            break
        found = m
    return found.group(1) if found else None


def _sentence_starts(text: str) -> list[int]:
    """Offsets in ``text`` where a sentence may start (after an end or a break), 0 included."""
    starts = {0}
    for m in QUOTE_SENTENCE_END.finditer(text):
        starts.add(m.end())
    for m in _LINE_BREAK.finditer(text):
        starts.add(m.end() if m.group(0).count("\n") > 1 else m.start() + 1)
    return sorted(starts)


def _is_boundary_end(content: str, b: int) -> bool:
    """Whether a sentence ends exactly at ``b`` (or only whitespace / a break follows)."""
    if b >= len(content.rstrip()):
        return True
    for m in SENTENCE_END.finditer(content, max(0, b - 3), min(len(content), b + 2)):
        if m.end() == b:
            return True
    return content.startswith("\n", b) and bool(_LINE_BREAK.match(content, b))


def widen_to_sentences(content: str, a: int, b: int) -> tuple[int, int]:
    """Move [a, b) (offsets in a leaf's content) out to sentence boundaries, at most MAX_WIDEN each way.

    Where no boundary is that near (a table, unpunctuated text) the edge stays where the chunk was cut.
    """
    lo = max(0, a - MAX_WIDEN)
    starts = [lo + s for s in _sentence_starts(content[lo:a + 1]) if s > 0 or lo == 0]
    na = max((s for s in starts if s <= a), default=a)
    nb = b
    if not _is_boundary_end(content, b):
        hi = min(len(content), b + MAX_WIDEN)
        ends = [m.end() for m in SENTENCE_END.finditer(content, b, hi)]
        ends += [m.start() for m in _LINE_BREAK.finditer(content, b, hi)]
        if ends:
            nb = min(ends)
        elif hi == len(content):
            nb = hi
    while na < nb and content[na].isspace():
        na += 1
    while nb > na and content[nb - 1].isspace():
        nb -= 1
    return na, nb


def sentence_window(content: str, para: tuple[int, int], core: tuple[int, int], limit: int) -> tuple[int, int]:
    """``core`` (sentence-aligned, inside ``para``) grown by whole sentences of its paragraph, the next
    one after and then the one before in turn, while the window stays within ``limit`` characters.

    A person who finds a match in a long paragraph reads on around it, not only the matching sentence.
    """
    pa, pb = para
    a, b = max(core[0], pa), min(core[1], pb)
    if pb - pa <= limit:
        return pa, pb
    bounds = sorted({pa + s for s in _sentence_starts(content[pa:pb])} | {pb})
    before = [x for x in bounds if x < a]
    after = [x for x in bounds if x > b]
    turn_after = True
    while before or after:
        side_after = turn_after and bool(after) or not before
        nxt = after[0] if side_after else before[-1]
        na, nb = (a, nxt) if side_after else (nxt, b)
        lo, hi = na, nb
        while lo < hi and content[lo].isspace():
            lo += 1
        while hi > lo and content[hi - 1].isspace():
            hi -= 1
        if hi - lo > limit:
            if side_after:
                after = []
            else:
                before = []
        else:
            a, b = lo, hi
            if side_after:
                after.pop(0)
            else:
                before.pop()
        turn_after = not turn_after
    return a, b


def build_passages(index: Index | None, ranked: Sequence[RetrievedChunk], widen: bool = True) -> list[Passage]:
    """Merge the step-2 chunks (numbered by their position, 1-based) into passages, in document order.

    ``widen`` False keeps each passage at its chunks' span: for text already cut where the answer
    step's context ends, so that no quote reaches outside what the context holds."""
    by_leaf: dict[tuple[str, str], list[tuple[int, RetrievedChunk]]] = {}
    for rank, rc in enumerate(ranked, 1):
        by_leaf.setdefault((rc.chunk.doc_path, rc.chunk.source_node_id), []).append((rank, rc))
    passages: list[Passage] = []
    for members in by_leaf.values():
        members.sort(key=lambda m: (m[1].chunk.start_char, m[1].chunk.end_char))
        groups: list[list[tuple[int, RetrievedChunk]]] = []
        leaf = leaf_text(index, members[0][1].chunk)
        for m in members:
            if groups:
                prev_end = max(x[1].chunk.end_char for x in groups[-1])
                gap_ok = m[1].chunk.start_char <= prev_end
                if not gap_ok and leaf is not None:
                    content, cs = leaf
                    gap = content[prev_end - cs:m[1].chunk.start_char - cs]
                    gap_ok = gap.strip() == "" and "\n\n" not in gap
                if gap_ok:
                    groups[-1].append(m)
                    continue
            groups.append([m])
        leaf_passages: list[Passage] = []
        for g in groups:
            p = _passage(index, g, leaf, widen)
            prev = leaf_passages[-1] if leaf_passages else None
            # two windows of one paragraph that do not overlap can still widen into the same sentence
            if prev is not None and prev.content is not None and p.content is not None and p.start <= prev.end:
                cs = prev.content_start
                prev.end = max(prev.end, p.end)
                prev.text = prev.content[prev.start - cs:prev.end - cs]
                prev.ranks += p.ranks
                continue
            leaf_passages.append(p)
        passages.extend(leaf_passages)
    passages.sort(key=lambda p: (p.chunk.doc_path, p.start))
    return passages


def _passage(index: Index | None, group: list[tuple[int, RetrievedChunk]], leaf: tuple[str, int] | None,
             widen: bool = True) -> Passage:
    first = group[0][1].chunk
    ranks = [(r, rc.chunk.start_char, rc.chunk.end_char) for r, rc in group]
    start = min(rc.chunk.start_char for _, rc in group)
    end = max(rc.chunk.end_char for _, rc in group)
    if leaf is not None and all(leaf_text(index, rc.chunk) is not None for _, rc in group):
        content, cs = leaf
        a, b = widen_to_sentences(content, start - cs, end - cs) if widen else (start - cs, end - cs)
        anchor = (first.start_char, first.start_line)
        return Passage(first, cs + a, cs + b, content[a:b], ranks, anchor, content, cs)
    # no trustworthy leaf text: stitch the chunk texts by their spans, no widening
    text = ""
    pos = start
    for _, rc in sorted(group, key=lambda m: m[1].chunk.start_char):
        c = rc.chunk
        if c.end_char <= pos:
            continue
        if c.start_char > pos:
            text += " "
            pos = c.start_char
        text += c.text[pos - c.start_char:]
        pos = c.end_char
    return Passage(first, start, start + len(text), text, ranks, (first.start_char, first.start_line))


def split_sentences(p: Passage, idx: int, k: int = 1) -> list[Sentence]:
    """Sentences of a passage; ``k`` = how many chunks step 2 returned (for the rank prior)."""
    out: list[Sentence] = []
    text = blank_comments(p.text)  # a comment-only "sentence" has no letters left and is skipped
    bounds = _sentence_starts(text) + [len(text)]
    for a, b in zip(bounds, bounds[1:]):
        seg = text[a:b]
        s = len(seg) - len(seg.lstrip())
        e = len(seg.rstrip())
        if e - s < 2 or not any(ch.isalnum() for ch in seg):
            continue
        start, end = p.start + a + s, p.start + a + e
        inside = [r for r, cs, ce in p.ranks if cs < end and ce > start]
        best = min(inside) if inside else min(r for r, _, _ in p.ranks)
        out.append(Sentence(idx, start, end, seg[s:e], prior=1.0 - (best - 1) / max(k, 1)))
    return out


# --------------------------------------------------------------------------- scoring

def idf_scope(index: Index, doc_path: str, bm25: Bm25Params) -> Scope:
    """Whose statistics a sentence of ``doc_path`` is weighed with: the corpus for ``corpus``, else its
    document. ``leaf`` means the document here too: a leaf holds a handful of chunks, too few to tell a
    rare word from a common one, and a quote's sentences come from several leaves of one document."""
    if bm25.bm25_idf_scope == "corpus" or doc_path not in index.doc_rows:
        return Scope.everything()
    return Scope.of_documents([doc_path])


def document_idf(index: Index | None, tokens: list[str], doc_path: str, bm25: Bm25Params) -> dict[str, float]:
    """BM25 IDF of each query term over the configured scope, from the store's own counts
    (``Search.term_stats``). No index (quotes of bare chunks): no IDF, so no BM25 term."""
    if index is None or not tokens:
        return {}
    return _idf_of(*index.search.term_stats(tokens, idf_scope(index, doc_path, bm25)), bm25)


def _idf_of(n: int, dfs: dict[str, int], bm25: Bm25Params) -> dict[str, float]:
    out: dict[str, float] = {}
    for t, df in dfs.items():
        if 0 < df <= n:
            # rank_bm25's negative-IDF floor (epsilon * average idf) is replaced by a small positive floor
            out[t] = max(okapi(n, df), bm25.bm25_epsilon * 0.1)
    return out


def score_sentences(sentences: list[Sentence], passages: list[Passage], query: Query, index: Index | None,
                    embedder: DocumentEmbedder, config: Config,
                    idf_memo: dict[str, dict[str, float]] | None = None) -> None:
    """Fill dense, bm25 and fused score of every sentence (in place)."""
    if not sentences:
        return
    bm25_params, answer = config.tuning.bm25, config.tuning.answer
    q_tokens = list(query.asked_tokens)
    toks = [tokenize(s.text) for s in sentences]
    avgdl = max(sum(len(t) for t in toks) / len(toks), 1.0)
    idf_memo = {} if idf_memo is None else idf_memo  # per document; the figure rows read it too
    many = getattr(index.search, "term_stats_many", None) if index is not None and q_tokens else None
    if many is not None and index is not None:  # every quoted document's counts in one round trip
        docs = list(dict.fromkeys(passages[s.passage].chunk.doc_path for s in sentences))
        for doc, (n, dfs) in zip(docs, many(q_tokens, [idf_scope(index, d, bm25_params) for d in docs])):
            idf_memo[doc] = _idf_of(n, dfs, bm25_params)
    bm25 = np.zeros(len(sentences), dtype=np.float32)
    k1, b = bm25_params.bm25_k1, bm25_params.bm25_b
    for i, (s, t) in enumerate(zip(sentences, toks)):
        doc = passages[s.passage].chunk.doc_path
        idf = idf_memo.get(doc)
        if idf is None:
            idf = idf_memo[doc] = document_idf(index, q_tokens, doc, bm25_params)
        tf = Counter(t)
        total = 0.0
        for term, qcount in Counter(q_tokens).items():
            f = tf.get(term, 0)
            if f and term in idf:
                total += qcount * idf[term] * f * (k1 + 1) / (f + k1 * (1 - b + b * len(t) / avgdl))
        bm25[i] = total
    w = answer.answer_rank_weight
    # Embedding a sentence costs a model call (~10 ms each on a busy CPU): only the sentences that
    # BM25 and their chunk's rank put in the running are embedded; the rest get the lowest dense score.
    prior = np.array([s.prior for s in sentences], dtype=np.float32)
    cheap = (1 - w) * answer.answer_bm25_weight * min_max_normalize(bm25) + w * prior
    k = answer.answer_dense_candidates
    pick = np.argsort(-cheap, kind="stable")[:k] if 0 < k < len(sentences) else np.arange(len(sentences))
    qvec = query.dense_vector
    vecs = np.asarray(embedder.embed_documents([sentences[i].text for i in pick]), dtype=np.float32)
    picked = vecs @ qvec
    dense = np.full(len(sentences), float(picked.min()) if len(picked) else 0.0, dtype=np.float32)
    dense[pick] = picked
    fused = fuse(dense.astype(np.float32), bm25,
                 dataclasses.replace(config.tuning.ranking.fused, bm25_weight=answer.answer_bm25_weight))
    for s, d, bm, f in zip(sentences, dense, bm25, fused):
        s.dense, s.bm25 = float(d), float(bm)
        s.score = float((1 - w) * f + w * s.prior)


# --------------------------------------------------------------------------- selection

def _line_of(p: Passage, offset: int) -> int:
    a_off, a_line = p.line_anchor
    if p.content is not None:
        cs = p.content_start
        lo, hi = sorted((a_off - cs, offset - cs))
        n = p.content.count("\n", max(lo, 0), max(hi, 0))
    else:
        lo, hi = sorted((a_off - p.start, offset - p.start))
        n = p.text.count("\n", max(lo, 0), max(hi, 0))
    return a_line + n if offset >= a_off else a_line - n


def _cut(text: str, limit: int) -> str:
    """An over-long sentence cut at a word boundary, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    sp = cut.rfind(" ")
    if sp > limit // 2:
        cut = cut[:sp]
    return cut.rstrip(" ,;:，、；：") + "…"


def select_quotes(sentences: list[Sentence], passages: list[Passage], params: AnswerParams) -> list[Quote]:
    """Best sentences within the budget, merged into quotes of consecutive sentences, best first."""
    if not sentences:
        return []
    order = sorted(range(len(sentences)), key=lambda i: (-sentences[i].score, i))
    budget = params.answer_max_chars
    chosen: list[int] = []
    used = 0
    for i in order:
        if len(chosen) >= params.answer_max_sentences:
            break
        s = sentences[i]
        if chosen and (used + len(s.text) > budget or s.score < params.answer_min_relative * sentences[order[0]].score):
            continue
        chosen.append(i)
        used += len(s.text)
    chosen_set = set(chosen)
    # runs of consecutive chosen sentences (sentence list is in passage/document order)
    runs: list[list[int]] = []
    for i in sorted(chosen_set):
        if runs and runs[-1][-1] == i - 1 and sentences[i - 1].passage == sentences[i].passage:
            runs[-1].append(i)
        else:
            runs.append([i])
    quotes: list[Quote] = []
    for run in runs:
        p = passages[sentences[run[0]].passage]
        a, b = sentences[run[0]].start, sentences[run[-1]].end
        text = without_comments(p.text[a - p.start:b - p.start])
        best = max(run, key=lambda i: sentences[i].score)
        text = " ".join(text.split()) if not has_cjk(text) else re.sub(r"\s*\n\s*", " ", text)
        text = _cut(text, max(budget, 80))
        ranks = sorted(r for r, cs, ce in p.ranks if cs < b and ce > a)
        if not ranks:
            ranks = sorted(r for r, _, _ in p.ranks)[:1]
        lines = (_line_of(p, a), _line_of(p, max(a, b - 1)))
        chunk = dataclasses.replace(p.chunk, text=text, start_char=a, end_char=b,
                                    start_line=lines[0], end_line=lines[1])
        sb = sentences[best]
        article = article_of(p, a)
        if article and text.lstrip().startswith(article):
            article = None  # the quote names it itself
        quotes.append(Quote(text, chunk, ranks, sb.score, sb.dense, (sb.start, sb.end), article))
    quotes.sort(key=lambda q: -q.score)
    return quotes




def extract(query: Query, ranked: Sequence[RetrievedChunk], index: Index | None, embedder: DocumentEmbedder,
            config: Config, *, widen: bool = True) -> Extract:
    """The extractive answer's quotes for ``ranked`` (best first: rank i = position i).

    ``widen`` False when ``ranked`` are the assembled context's passages: they already end where the
    context ends (see ``build_passages``)."""
    passages = build_passages(index, ranked, widen)
    sentences: list[Sentence] = []
    for i, p in enumerate(passages):
        sentences.extend(split_sentences(p, i, len(ranked)))
    idf_memo: dict[str, dict[str, float]] = {}
    score_sentences(sentences, passages, query, index, embedder, config, idf_memo)
    weigh_for_figures(sentences, passages, query, index)
    quotes = select_quotes(sentences, passages, config.tuning.answer)
    found = figure_quote(query, passages, index, config, len(ranked), idf_memo)
    if found is not None:
        figure, fits = found
        if fits or not quotes:  # the asked figure leads: it states the quantity for the period asked
            figure.score = max([figure.score] + [q.score for q in quotes])
            quotes.insert(0, figure)
        else:  # another kind of period, or a guessed sub-column: evidence after the best sentence, not the answer
            quotes.insert(1, figure)
    measure = asked_measure(query.text)
    printed = found is not None and found[1] and measure is not None and prints_measure(found[0].label, measure)
    derived = None if measure is None or printed else derived_quote(query, measure, passages, index, len(ranked))
    if derived is not None:  # the measure no row prints, computed from the rows that define it, leads
        derived.score = max([derived.score] + [q.score for q in quotes])
        quotes.insert(0, derived)
    return Extract(quotes, len(sentences))


def derived_quote(query: Query, measure: Measure, passages: list[Passage], index: Index | None,
                  k: int) -> Quote | None:
    """The asked measure computed from two rows of one table of the context (``derived_figures``), as a
    quote that says which rows and columns it read. Read from a section titled as the measure's
    statement that holds both rows, only in the documents the question names (as ``figure_quote``):
    of one document's such sections the first (the statements precede the notes, and a note may print
    a statement of the same title for a part of the group: a guarantor group's, the parent's), of
    several documents the best-ranked."""
    named = named_documents(query, index)
    statement = measure.kinds
    by_leaf: dict[str, list[Passage]] = {}  # a leaf's passages: the two rows may lie in two
    for p in passages:
        if (named is None or p.chunk.doc_path in named) and p.content is not None \
                and titled_as(statement, p.chunk.section_title):
            by_leaf.setdefault(p.chunk.source_node_id, []).append(p)
    found: dict[str, tuple[int, int, Quote]] = {}  # per document: (the statement's first row, rank, quote)
    for leaf in list(by_leaf):
        group = [x for x in continued_sections(index, leaf) if x in by_leaf]
        held = [p for x in group for p in by_leaf[x]]
        texts = [(by_leaf[x][0].content or "", by_leaf[x][0].content_start,
                  [(p.start - p.content_start, p.end - p.content_start) for p in by_leaf[x]]) for x in group]
        doc = held[0].chunk.doc_path
        d = derive(measure, query.text, texts, card_names(index, doc))
        if d is None:
            continue
        a, b = d.start, d.end
        ranks = _ranks_over(held, a, b)
        first_p = next((p for p in held if p.start <= a < p.end), held[0])
        last_p = next((p for p in held if p.start < b <= p.end), first_p)
        rows = index.leaf_rows.get(leaf) if index is not None else None
        order = rows[0] if rows is not None else 0
        best = found.get(doc)
        if best is None or (order, ranks[0]) < best[:2]:
            chunk = dataclasses.replace(first_p.chunk, text=d.text, start_char=a, end_char=b,
                                        start_line=_line_of(first_p, a), end_line=_line_of(last_p, max(a, b - 1)))
            found[doc] = (order, ranks[0], Quote(d.text, chunk, ranks, 1.0 - (ranks[0] - 1) / max(k, 1), 0.0, (a, b),
                                                 read=d.read, label=measure.name))
    return min(found.values(), key=lambda f: f[1])[2] if found else None


def figure_quote(query: Query, passages: list[Passage], index: Index | None, config: Config,
                 k: int, idf_memo: dict[str, dict[str, float]] | None = None) -> tuple[Quote, bool] | None:
    """The table row of the evidence that states the asked quantity for the asked period, as a quote
    that says which row and column it read (``retrieval.figure_rows``), and whether it fits the
    question (``Figure.fits``); None when no row does.

    Rows are matched with the question's words weighted by the document's IDF, less the words of
    the document's card (its issuer and title name the document, not a row); among equally good
    rows the one from the better-ranked evidence wins. No row is read from a document the question
    does not name when it names others (``named_documents``): another company's filing states
    another company's figure. ``idf_memo``: each document's IDF, as the sentence scoring computed
    it (one store count per document, not per passage)."""
    if not asks_quantity(query.text):
        return None  # no row answers a question that asks for no quantity (``figures_in`` agrees)
    memo = {} if idf_memo is None else idf_memo
    best: tuple[float, Quote, bool] | None = None
    named = named_documents(query, index)
    for p in passages:
        text, base = (p.content, p.content_start) if p.content is not None else (p.text, p.start)
        if named is not None and p.chunk.doc_path not in named:
            continue
        for f in rows_stating(query, text, (p.start - base, p.end - base), p.chunk, index, config, memo)[:1]:
            a, b = base + f.start, base + f.end
            ranks = _ranks_over([p], a, b)
            prior = 1.0 - (ranks[0] - 1) / max(k, 1)
            score = f.score + FIGURE_PRIOR_WEIGHT * prior
            if best is None or score > best[0]:
                lines = (_line_of(p, a), _line_of(p, max(a, b - 1)))
                chunk = dataclasses.replace(p.chunk, text=f.text, start_char=a, end_char=b,
                                            start_line=lines[0], end_line=lines[1])
                best = (score, Quote(f.text, chunk, ranks, score, 0.0, (a, b), read=f.read, label=f.label), f.fits)
    return (best[1], best[2]) if best is not None else None


def rows_stating(query: Query, text: str, span: tuple[int, int], chunk: Chunk, index: Index | None, config: Config,
                 idf_memo: dict[str, dict[str, float]]) -> list[Figure]:
    """The rows of ``text`` (the leaf of ``chunk``) inside ``span`` that state the asked quantity, best
    first (``figure_rows.figures_in``), matched with the question's own words weighted by the
    document's IDF (``idf_memo``: per document, filled here) less the words of the document's card."""
    doc = chunk.doc_path
    if doc not in idf_memo:
        idf_memo[doc] = document_idf(index, list(query.asked_tokens), doc, config.tuning.bm25)
    section = chunk.section_title
    return figures_in(text, query.text, idf_memo[doc], span, card_names(index, doc), section, query.asked_tokens)


def card_names(index: Index | None, doc: str) -> frozenset[str]:
    """The words of a document's card (issuer, title, file name): they name the document, not a row."""
    card = index.card_terms.get(doc) if index is not None else None
    return card.names | card.hint_names if card is not None else frozenset()


def _ranks_over(passages: Sequence[Passage], a: int, b: int) -> list[int]:
    """The ranks of the hits of ``passages`` that overlap [a, b), best first; the first passage's best
    when none does (a row that a sentence widening brought in)."""
    return sorted(r for p in passages for r, cs, ce in p.ranks if cs < b and ce > a) \
        or sorted(r for r, _, _ in passages[0].ranks)[:1]


def weigh_for_figures(sentences: list[Sentence], passages: list[Passage], query: Query, index: Index | None) -> None:
    """For a question that asks for a quantity (in place): a sentence that states a figure and names
    the asked period gains ``FIGURE_SENTENCE_BONUS`` when its document is one the question names
    (``named_documents``: another company's figure answers nothing); a label fragment
    (``is_label_fragment``) loses ``LABEL_FRAGMENT_PENALTY``."""
    if not asks_quantity(query.text):
        return
    periods = asked_periods(query.text)
    named = named_documents(query, index) if periods else None
    for s in sentences:
        if is_label_fragment(s.text):
            s.score -= LABEL_FRAGMENT_PENALTY
        if named is not None and passages[s.passage].chunk.doc_path not in named:
            continue
        if periods and states_figure_for(s.text, periods):
            s.score += FIGURE_SENTENCE_BONUS


def is_label_fragment(text: str) -> bool:
    """Whether a "sentence" is a label: a table header's or heading's few words ("Total CVS Health
    Shareholders' Equity"), with no figure and no sentence end. It names a quantity; it states none,
    so it never answers a question that asks for one, however many of the question's words it holds."""
    words = text.split()
    return (len(words) < LABEL_FRAGMENT_WORDS and not any(ch.isdigit() for ch in text)
            and not text.rstrip().endswith((".", "?", "!", ":", ";", "。")))


def named_documents(query: Query, index: Index | None) -> set[str] | None:
    """The documents whose card names what the question names about as well as the best-named one
    (half its card match or more), plus every document without a card; None when the cards tell no
    document apart (one company's filings, or no name asked). Names only, not years: a later
    filing restates the asked year, and the column header decides the year. Names weigh as in
    retrieval (``doc_cards.name_spread``, ``confirmed``): a word every document's text uses names
    nothing, so "financial" in a question no longer names a release titled "... Financial Results".
    Computed once a question (the context's row lead and the answer ask it; each match counts words in
    the store)."""
    cards = index.card_terms if index is not None else None
    if not cards or len(cards.by_path) < 2:
        return None
    return query.memo.get_or_make("named_documents", lambda: _named_documents(query, index))


def _named_documents(query: Query, index: Index) -> set[str] | None:
    cards = index.card_terms
    paths = list(cards.by_path)
    undated = re.sub(r"\d", " ", query.text)
    words = [t for t in query.asked_tokens if not any(ch.isdigit() for ch in t)]
    chosen = [confirmed(index, cards.by_path[p], words) for p in paths]
    match = card_match(undated, words, chosen, name_spread(index, words, chosen))
    if match.max() <= 0:
        return None
    named = {p for p, m in zip(paths, match) if m >= NAMED_SHARE * match.max()}
    return named | {d for d in index.doc_rows if d not in cards.by_path}
