"""Rules extraction of a long leaf's graph: no model, deterministic, in the style of LazyGraphRAG's
NLP graph.

Nodes: names and noun phrases, acronyms with their expansions (one node, the expansion an alias),
defined terms ("X" means / 本法所称X), numbers with units, cross-references (Section 3, Table 2,
第十条, and 前款 / 本条 / 前条 resolved to the article they point at). Chinese uses jieba's
part-of-speech tags. Edges: co-occurrence in a sentence (weight 1) or in a chunk (weight 0.5),
labelled with the words between the two mentions when they are adjacent and few, so a path reads
"AdaRouter -[trained on]-> ZetaCorpus"; a cross-reference inside an article is a "cites" edge.

Why no hub nodes: entities are merged only inside the leaf, a bare common word is a node only when
it recurs, and a node mentioned in most of a long leaf's chunks takes no co-occurrence edges (it
would link everything to everything, which is what diffusion must not follow).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from indexing.kg_graph import KGEdge, KGNode, LeafGraph
from utils.cjk import has_han
from utils.tokenizer import EN_STOPWORDS, s_stem, load_jieba

EXTRACTOR_VERSION = "rules-3"
"""Part of every graph key: a change to the rules makes an update extract the graphs again."""
SENTENCE_EDGE = 1.0
CHUNK_EDGE = 0.5
MAX_PAIRS_SENTENCE = 12
"""Mentions of one sentence paired all-to-all up to this many; beyond it only neighbours pair."""
HUB_SHARE = 0.5
HUB_MIN_CHUNKS = 6
"""A node in more than HUB_SHARE of the leaf's chunks (and at least HUB_MIN_CHUNKS) takes no edges."""
MAX_RELATION_CHARS = 40
MAX_DEGREE = 24
"""Edges one node keeps at most (its strongest); see ``cap_degree``."""

_SENT = re.compile(r"(?<=[.!?;。！？；])\s+|(?<=[。！？；])|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-']*|\d+(?:[.,]\d+)*")
_ACRONYM = re.compile(r"\b[A-Z][A-Za-z0-9]*[A-Z][A-Za-z0-9]*s?\b")
_EXPANSION = re.compile(r"((?:[A-Za-z][\w\-]*\s+){0,7}[A-Za-z][\w\-]*)\s*\(\s*([A-Z][A-Za-z0-9\-]*[A-Z0-9]s?)\s*\)")
_UNITS = (r"%|percent|ms|sec|seconds?|minutes?|hours?|days?|weeks?|months?|years?|[KMGT]B|[kKMB]\b|million|"
          r"billion|thousand|tokens?|words?|sentences?|documents?|examples?|samples?|epochs?|layers?|"
          r"dimensions?|dims?|parameters?|params|points?|questions?|pairs?|articles?|papers?|hz|Hz|GHz|"
          r"GPUs?|CPUs?|x\b|times")
_QUANTITY = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)\s?(" + _UNITS + r")(?![A-Za-z])")
_ZH_NUM = r"[0-9一二三四五六七八九十百千万零〇两]+"
_ZH_QUANTITY = re.compile(r"(" + _ZH_NUM + r"(?:\.\d+)?)\s?(%|％|元|万元|亿元|日|天|年|个月|月|周|小时|倍|人|次|项|份|公里|米|吨)")
_REF = re.compile(r"\b(Section|Sec\.|Table|Tab\.|Figure|Fig\.|Equation|Eq\.|Appendix|Algorithm|Chapter|"
                  r"Article|Theorem|Lemma|Definition)\s*([A-Z]?\d+(?:\.\d+)*[a-z]?|[A-Z]\b)")
_REF_NAMES = {"sec.": "section", "tab.": "table", "fig.": "figure", "eq.": "equation"}
_ZH_ARTICLE = re.compile(r"第(" + _ZH_NUM + r")条(?:第(" + _ZH_NUM + r")款)?(?:第(" + _ZH_NUM + r")项)?")
_ZH_RELATIVE = re.compile(r"前款|前两款|前三款|本款|本条|前条|前一条")
_ARTICLE_START = re.compile(r"^\s*第(" + _ZH_NUM + r")条")
_DEFINED_EN = re.compile(r"[\"“]([A-Za-z][\w\- ]{1,48}[\w])[\"”]|\b(?:we call|called|referred to as|denoted as|"
                         r"termed|known as|defined as)\s+(?:the\s+|an?\s+)?([A-Z]?[a-z\-]+(?:\s+[a-z\-]+){0,3})")
_DEFINED_ZH = re.compile(r"(?:本\w{0,3}所称|所谓)“?([\u3400-\u9fff]{2,12})”?(?:，|,)?是指|“([\u3400-\u9fff]{2,12})”")
_VERBISH = frozenset("""is are was were be been being has have had do does did can could may might must shall
should will would use uses used using show shows shown showed achieve achieves achieved obtain obtains obtained
propose proposes proposed contain contains contained include includes included consist consists compare
compared compares train trained trains outperform outperforms improve improves improved provide provides
provided perform performs performed report reports reported reach reaches reached yield yields
yielded achieve lead leads led describe describes described introduce introduces introduced present presents presented make makes made give
gives given take takes taken get gets find finds found see seen note noted apply applies applied based also
then thus however therefore while whereas since because although each every all both either neither other such
than very more most less least many much several various different same new first second third last""".split())
_ZH_NOUN_FLAGS = ("n", "nr", "ns", "nt", "nz", "nw", "vn", "eng", "an", "nrt", "nrfg", "j", "l")
_ZH_GENERIC = frozenset("""规定 情形 有关 国家 人民 单位 部门 工作 情况 问题 方面 活动 行为 事项 办法 措施 要求 条件
程序 内容 范围 时间 期间 责任 权利 义务 本法 法律 其他 相应 有关部门 人民政府""".split())


@dataclass
class _Mention:
    key: str
    name: str
    type: str
    start: int
    end: int
    alias: str = ""


@dataclass
class _Builder:
    """Nodes and edges of one leaf as they accumulate, merged by normalised name and alias."""

    nodes: list[KGNode] = field(default_factory=list)
    by_key: dict[str, int] = field(default_factory=dict)
    edges: dict[tuple[int, int], KGEdge] = field(default_factory=dict)

    def node(self, m: _Mention, chunk: int) -> int:
        i = self.by_key.get(m.key)
        if i is None:
            i = self.by_key[m.key] = len(self.nodes)
            self.nodes.append(KGNode(m.name, m.type))
        n = self.nodes[i]
        if m.type in ("acronym", "term", "ref") and n.type in ("concept", "entity"):
            n.type = m.type  # the more specific reading wins
        for a in (m.name, m.alias):
            if a and a != n.name and a not in n.aliases and len(n.aliases) < 8:
                n.aliases.append(a)
        if not n.chunks or n.chunks[-1] != chunk:
            n.chunks.append(chunk)
        return i

    def alias(self, alias_key: str, target: int) -> None:
        self.by_key.setdefault(alias_key, target)

    def edge(self, a: int, b: int, relation: str, weight: float, chunk: int) -> None:
        if a == b:
            return
        head, tail = (a, b) if a < b else (b, a)
        e = self.edges.get((head, tail))
        if e is None:
            e = self.edges[(head, tail)] = KGEdge(a, b, relation, 0.0)
        elif relation != "co-occurs with" and e.relation == "co-occurs with":
            e.head, e.tail, e.relation = a, b, relation
        e.weight += weight
        if not e.chunks or e.chunks[-1] != chunk:
            e.chunks.append(chunk)


def graph_key(mode: str, chunk_texts: Sequence[str], extra: str = "") -> str:
    """What a leaf's graph depends on: the extractor and the exact chunk texts it read."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{mode}\0{EXTRACTOR_VERSION}\0{extra}\0".encode())
    for t in chunk_texts:
        h.update(t.encode("utf-8") + b"\0")
    return h.hexdigest()


def norm_key(name: str) -> str:
    """Merge key of a name: case, spacing, hyphens and a plural -s folded (Han text as is)."""
    s = re.sub(r"[\s\-_]+", " ", name.strip().lower())
    s = re.sub(r"^(the|a|an)\s+", "", s)
    words = s.split(" ")
    if words and words[-1].isalpha():
        words[-1] = s_stem(words[-1])
    return " ".join(words)


def _sentences(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for part in _SENT.split(text):
        start = text.find(part, pos) if part else pos
        if part and part.strip():
            out.append((start, part))
        pos = start + len(part)
    return out


class _Mentions:
    """Mentions of one sentence, none overlapping another: the first pattern to claim a span keeps it."""

    def __init__(self) -> None:
        self._found: list[_Mention] = []

    def add(self, m: _Mention) -> None:
        if not any(m.start < f.end and f.start < m.end for f in self._found):
            self._found.append(m)

    def in_order(self) -> list[_Mention]:
        return sorted(self._found, key=lambda m: m.start)


def _en_mentions(s: str) -> list[_Mention]:
    found = _Mentions()
    add = found.add

    for m in _EXPANSION.finditer(s):
        acr = m.group(2)
        letters = acr.rstrip("s")
        words = m.group(1).split()
        # the expansion: as many trailing words as the acronym has letters (hyphenated words count their parts)
        take: list[str] = []
        count = 0
        for w in reversed(words):
            take.insert(0, w)
            count += max(1, len([p for p in w.split("-") if p]))
            if count >= len(letters):
                break
        expansion = " ".join(take)
        initials = "".join(p[0] for w in take for p in w.split("-") if p).lower()
        if initials[:2] == letters[:2].lower() or initials.startswith(letters[0].lower()) and len(take) > 1:
            start = m.start(1) + m.group(1).rfind(take[0])
            add(_Mention(norm_key(letters), letters, "acronym", start, m.end(), alias=expansion))
    for m in _REF.finditer(s):
        kind = _REF_NAMES.get(m.group(1).lower(), m.group(1).lower())
        name = f"{kind.capitalize()} {m.group(2)}"
        add(_Mention(norm_key(name), name, "ref", m.start(), m.end()))
    for m in _QUANTITY.finditer(s):
        name = f"{m.group(1)} {m.group(2)}" if m.group(2) != "%" else f"{m.group(1)}%"
        add(_Mention(norm_key(name), name, "quantity", m.start(), m.end()))
    for m in _DEFINED_EN.finditer(s):
        term = m.group(1) or m.group(2)
        if term and len(term.split()) <= 5:
            g = 1 if m.group(1) else 2
            add(_Mention(norm_key(term), term, "term", m.start(g), m.end(g)))
    for m in _ACRONYM.finditer(s):
        add(_Mention(norm_key(m.group(0).rstrip("s") if m.group(0).isupper() or m.group(0)[:-1].isupper()
                              else m.group(0)), m.group(0), "acronym" if m.group(0).rstrip("s").isupper()
                     else "entity", m.start(), m.end()))
    # noun phrases: runs of content words cut at stop-words, verbs and punctuation, at most four words
    run: list[re.Match[str]] = []

    def close() -> None:
        while run and (run[-1].group(0).lower() in EN_STOPWORDS or run[-1].group(0).lower() in _VERBISH):
            run.pop()
        if run:
            words = run[-4:]
            text = s[words[0].start():words[-1].end()]
            caps = any(w.group(0)[0].isupper() for w in words)
            kind = "entity" if caps else "concept"
            if len(words) > 1 or caps or len(text) >= 4:
                add(_Mention(norm_key(text), text, kind, words[0].start(), words[-1].end()))
        run.clear()

    last_end = 0
    for w in _WORD.finditer(s):
        tok = w.group(0)
        low = tok.lower()
        gap = s[last_end:w.start()]
        if run and gap.strip():  # punctuation between words ends a phrase
            close()
        last_end = w.end()
        if low in EN_STOPWORDS or low in _VERBISH or tok[0].isdigit() or low.endswith("ly") and len(low) > 4 \
                or (low.endswith("ed") and len(low) > 4 and not tok[0].isupper()):
            close()
            continue
        run.append(w)
    close()
    return found.in_order()


def _zh_mentions(s: str, article: str | None, previous_article: str | None) -> list[_Mention]:
    import jieba.posseg as pseg  # noqa: PLC0415

    load_jieba()
    found = _Mentions()
    add = found.add

    for m in _ZH_ARTICLE.finditer(s):
        add(_Mention(m.group(0), m.group(0), "ref", m.start(), m.end()))
    for m in _ZH_RELATIVE.finditer(s):
        word = m.group(0)
        target = previous_article if word in ("前条", "前一条") else article
        if target:
            add(_Mention(target, target, "ref", m.start(), m.end(), alias=word))
    for m in _ZH_QUANTITY.finditer(s):
        add(_Mention(m.group(0), m.group(0), "quantity", m.start(), m.end()))
    for m in _DEFINED_ZH.finditer(s):
        g = 1 if m.group(1) else 2
        add(_Mention(m.group(g), m.group(g), "term", m.start(g), m.end(g)))
    for m in _EXPANSION.finditer(s):  # Latin acronyms inside Chinese text
        add(_Mention(norm_key(m.group(2)), m.group(2), "acronym", m.start(2), m.end(2)))
    pos = 0
    run: list[tuple[str, int, int]] = []

    def close() -> None:
        if run:
            text = "".join(w for w, _, _ in run[-3:])
            start = run[-3:][0][1]
            if 2 <= len(text) <= 12 and text not in _ZH_GENERIC:
                add(_Mention(text, text, "concept", start, run[-1][2]))
        run.clear()

    for word, flag in pseg.cut(s):
        start = s.find(word, pos)
        if start < 0:
            start = pos
        pos = start + len(word)
        if flag in _ZH_NOUN_FLAGS and (len(word) >= 2 or run) and word.strip():
            if flag == "eng":
                close()
                if len(word) >= 2:
                    add(_Mention(norm_key(word), word, "entity", start, pos))
                continue
            run.append((word, start, pos))
        else:
            close()
    close()
    return found.in_order()


def _relation(sentence: str, a: _Mention, b: _Mention) -> str:
    between = sentence[a.end:b.start].strip(" ,;:，、；：\"'“”‘’()（）")
    if 0 < len(between) <= MAX_RELATION_CHARS and not re.search(r"[.。!?！？]", between):
        return " ".join(between.split())
    return "co-occurs with"


def extract_rules(leaf_id: str, chunk_texts: Sequence[str], max_nodes: int = 400) -> LeafGraph:
    """The leaf's graph from its chunks' texts (chunk k = ``chunk_texts[k]``)."""
    b = _Builder()
    per_chunk: list[list[tuple[int, list[_Mention]]]] = []
    article: str | None = None
    previous_article: str | None = None
    for k, text in enumerate(chunk_texts):
        sentences: list[tuple[int, list[_Mention]]] = []
        for _, sent in _sentences(text):
            if has_han(sent):
                start = _ARTICLE_START.match(sent)
                if start:
                    previous_article, article = article, f"第{start.group(1)}条"
                mentions = _zh_mentions(sent, article, previous_article)
            else:
                mentions = _en_mentions(sent)
            ids = []
            for m in mentions:
                i = b.node(m, k)
                if m.alias and m.type == "acronym":
                    b.alias(norm_key(m.alias), i)
                ids.append(i)
            sentences.append((k, [m for m in mentions]))
            _sentence_edges(b, sent, mentions, ids, k, article if has_han(sent) else None)
        per_chunk.append(sentences)
    _drop_rare_concepts(b, len(chunk_texts))
    _chunk_edges(b, per_chunk)
    return _finish(b, leaf_id, len(chunk_texts), max_nodes)


def _sentence_edges(b: _Builder, sent: str, mentions: list[_Mention], ids: list[int], k: int,
                    article: str | None) -> None:
    pairs: Iterable[tuple[int, int]]
    n = len(ids)
    if n <= MAX_PAIRS_SENTENCE:
        pairs = ((i, j) for i in range(n) for j in range(i + 1, n))
    else:
        pairs = ((i, j) for i in range(n) for j in range(i + 1, min(n, i + 3)))
    for i, j in pairs:
        rel = _relation(sent, mentions[i], mentions[j]) if j == i + 1 else "co-occurs with"
        b.edge(ids[i], ids[j], rel, SENTENCE_EDGE, k)
    if article is not None:  # an article cites every other article it names
        src = b.by_key.get(article)
        if src is not None:
            for m, i in zip(mentions, ids):
                if m.type == "ref" and i != src and not m.alias:
                    b.edge(src, i, "cites", SENTENCE_EDGE, k)


def _chunk_edges(b: _Builder, per_chunk: list[list[tuple[int, list[_Mention]]]]) -> None:
    for sentences in per_chunk:
        if len(sentences) < 2:
            continue
        k = sentences[0][0]
        seen: list[set[int]] = [{b.by_key[m.key] for m in ms if m.key in b.by_key} for _, ms in sentences]
        for x in range(len(seen)):
            for y in range(x + 1, len(seen)):
                for i in seen[x]:
                    for j in seen[y] - seen[x]:
                        if (min(i, j), max(i, j)) not in b.edges:
                            b.edge(i, j, "co-occurs with", CHUNK_EDGE, k)


def _drop_rare_concepts(b: _Builder, n_chunks: int) -> None:
    """A bare lowercase one-word concept is a node only when it recurs: otherwise every noun is one."""
    keep = [not (n.type == "concept" and " " not in n.name and not has_han(n.name) and len(n.chunks) < 2)
            for n in b.nodes]
    _reindex(b, keep)


def _reindex(b: _Builder, keep: list[bool]) -> None:
    new_of = {}
    nodes = []
    for i, (n, k) in enumerate(zip(b.nodes, keep)):
        if k:
            new_of[i] = len(nodes)
            nodes.append(n)
    edges = {}
    for (h, t), e in b.edges.items():
        if h in new_of and t in new_of:
            e.head, e.tail = new_of[e.head], new_of[e.tail]
            edges[(new_of[h], new_of[t])] = e
    b.nodes, b.edges = nodes, edges
    b.by_key = {key: new_of[i] for key, i in b.by_key.items() if i in new_of}


def _finish(b: _Builder, leaf_id: str, n_chunks: int, max_nodes: int) -> LeafGraph:
    hub = max(HUB_MIN_CHUNKS, int(HUB_SHARE * n_chunks) + 1)
    hubs = {i for i, n in enumerate(b.nodes) if len(n.chunks) >= hub and n.type != "ref"}
    b.edges = {p: e for p, e in b.edges.items() if e.head not in hubs and e.tail not in hubs}
    if len(b.nodes) > max_nodes:  # the most mentioned and most connected nodes stay
        deg = [0] * len(b.nodes)
        for e in b.edges.values():
            deg[e.head] += 1
            deg[e.tail] += 1
        rank = sorted(range(len(b.nodes)), key=lambda i: (-len(b.nodes[i].chunks), -deg[i], i))[:max_nodes]
        keep = [False] * len(b.nodes)
        for i in rank:
            keep[i] = True
        _reindex(b, keep)
    edges = cap_degree(list(b.edges.values()), len(b.nodes), MAX_DEGREE)
    edges.sort(key=lambda e: (min(e.head, e.tail), max(e.head, e.tail)))
    return LeafGraph(leaf_id, "", "rules", b.nodes, edges)


def cap_degree(edges: list[KGEdge], n_nodes: int, cap: int) -> list[KGEdge]:
    """Keep an edge only if it is among the ``cap`` strongest of both its nodes: no node keeps more
    than ``cap`` edges, so a term that recurs all over a very long leaf links to what it co-occurs
    with most, not to everything (the hub a walk would otherwise run through)."""
    by_node: list[list[int]] = [[] for _ in range(n_nodes)]
    for j, e in enumerate(edges):
        by_node[e.head].append(j)
        by_node[e.tail].append(j)
    top: list[set[int]] = []
    for js in by_node:
        js.sort(key=lambda j: (-edges[j].weight, -len(edges[j].chunks), j))
        top.append(set(js[:cap]))
    return [e for j, e in enumerate(edges) if j in top[e.head] and j in top[e.tail]]


def question_mentions(text: str) -> list[tuple[str, str]]:
    """(merge key, surface) of what a question names: how the graph channel finds its seeds."""
    if has_han(text):
        ms = _zh_mentions(text, None, None)
    else:
        ms = _en_mentions(text)
    return [(m.key, m.name) for m in ms] + [(norm_key(m.alias), m.alias) for m in ms if m.alias]
