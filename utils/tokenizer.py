"""Tokenisation for BM25 (index time and query time) and token-budget estimates.

    tokenize(text) -> list[str]          BM25 terms; deterministic, so a query
                                         and a chunk tokenised years apart match
    is_stopword_only(text) -> bool       "nothing to search for"
    estimate_tokens(text) -> int         LLM token budget estimate (final)
    EN_STOPWORDS, ZH_STOPWORDS           the stop-word sets
    TOKENIZER_VERSION                    stored in the BM25 index; bump on any
                                         change that alters the tokens

Rules, and why:
- Text is NFKC-normalised first: Chinese documents mix full-width and
  half-width letters, digits and punctuation (``ＧＤＰ``, ``１２３``, ``，``);
  NFKC makes both forms the same term.
- The text is split into runs of Han characters and everything else. Han runs
  go to jieba; the rest is lowercased and cut on non-alphanumerics. Whitespace
  *between* Han characters is removed inside a run (hard-wrapped Chinese text
  must not split a word in two).
- Numbers stay whole: ``73.2`` and ``3.2.1`` are one term, ``1,000`` becomes
  ``1000`` (a figure is a strong keyword; splitting it at the dot makes ``73.2``
  match every ``2``). Other punctuation separates: ``EUR/USD`` -> ``eur``, ``usd``.
- English stop-words are NLTK's list; after them, Harman's S-stemmer (three
  rules: -ies -> -y, -es -> -e, -s -> '') folds plurals so "routers" finds
  "router". Anything heavier (Porter) conflates too much for a keyword scorer
  whose job is exact evidence next to a dense model.
- jieba runs in *search-engine mode* (``cut_for_search``): it emits the
  precise-mode words plus the dictionary sub-words of long ones
  (``中华人民共和国`` -> ``中华 人民 共和国 … 中华人民共和国``). Query and chunk are
  segmented in different contexts, so precise mode often cuts the same phrase
  differently on each side and the terms never meet; the sub-words make BM25
  robust to that (the figures: tests/test_tokenizer.py's docstring).
- Chinese stop-words are a short list of particles, pronouns and question
  words; negations (不, 没有) and modal verbs (应当, 可以) are *not* stop-words,
  they change legal meaning.
- A non-empty Chinese text never tokenises to nothing: when every jieba token
  is a stop-word, the Han characters' unigrams and bigrams are returned (a
  chunk reading "是的。" must still be a document BM25 can score).

jieba is imported and its dictionary loaded (~1 s) only the first time a text
with Han characters is tokenised, with its "Building prefix dict" log silenced.
The loaded jieba module is cached per process in ``_JIEBA``: it is an
immutable resource (the dictionary), not state that changes results.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from types import ModuleType
from typing import Iterable

from utils.cjk import CJK_LETTER

TOKENIZER_VERSION = "treerag-tok-1"

_WORD = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")
_ASCII_RUN = re.compile(r"[A-Za-z0-9_]+")
_OTHER_ALNUM = re.compile(r"[^\W_A-Za-z0-9]")
_PUNCT = re.compile(r"[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Rough LLM token count without loading a tokenizer.

    CJK characters cost about one token each in current LLM tokenizers, Latin
    words about 1.3 (sub-word splits), punctuation one. Good to ~15%, which is
    all a budget needs.
    """
    cjk = len(CJK_LETTER.findall(text))
    rest = CJK_LETTER.sub(" ", text)
    # _WORD's matches, counted without a Python step per match (a build estimates every node):
    # an ASCII run is a word, and so is a single other character that is alphanumeric
    # ([^\W_] is str.isalnum()); any other single non-space character is one token.
    words = len(_ASCII_RUN.findall(rest)) + len(_OTHER_ALNUM.findall(rest))
    other = len(_PUNCT.findall(rest))
    return cjk + int(round(words * 1.3)) + other


# --------------------------------------------------------------------------- #
# Stop-words
# --------------------------------------------------------------------------- #

#: NLTK's English stop-word list (179 words). Contractions appear split at the
#: apostrophe ("don't" -> "don", "t"), as the tokenizer splits them.
EN_STOPWORDS: frozenset[str] = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves what
which who whom this that these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for
with about against between into through during before after above below to from up
down in out on off over under again further then once here there when where why how
all any both each few more most other some such no nor not only own same so than too
very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn
hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
""".split())

#: Particles, pronouns, conjunctions and question words: what a Chinese question
#: wraps around its content. Kept short on purpose (see module docstring).
ZH_STOPWORDS: frozenset[str] = frozenset("""
的 地 得 之 了 着 过 吗 呢 吧 啊 呀 哦 嘛 么 呗 哈
是 在 和 与 或 及 以及 或者 还是 等 等等 也 就 都 而 且 并 并且 而且 但 但是 却 则
被 把 对 于 对于 关于 由 从 向 给 将 让 以 为 因为 所以 如果 那么
这 那 这个 那个 这些 那些 这样 那样 此 其 该 个 种
我 你 您 他 她 它 我们 你们 他们 她们 它们 自己 大家
什么 怎么 怎样 怎么样 如何 哪 哪些 哪个 哪里 为什么 为何 多少 几 是否 请问 请 呢 吗
一个 一些 有些 一下 一种
""".split())

# --------------------------------------------------------------------------- #
# Patterns
# --------------------------------------------------------------------------- #

_HAN_CLASS = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HAN = re.compile(f"[{_HAN_CLASS}]")
#: A Han run: Han characters, with punctuation and whitespace allowed between
#: them (punctuation is dropped later; whitespace is removed before jieba).
_HAN_RUN = re.compile(f"[{_HAN_CLASS}](?:[{_HAN_CLASS}]|[^\\w\\s]|\\s+(?=[{_HAN_CLASS}]))*")
_SPACE = re.compile(r"\s+")
#: Latin-side terms: thousands-separated numbers, dotted numbers, then any run
#: of letters/digits (any script but Han, which never reaches this pattern).
_TERM = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\w)"
    r"|\d+(?:\.\d+)+(?!\w)"
    r"|[^\W_]+"
)

# --------------------------------------------------------------------------- #
# jieba, lazily
# --------------------------------------------------------------------------- #

_JIEBA: ModuleType | None = None
_JIEBA_LOCK = threading.Lock()


def load_jieba() -> ModuleType:
    """jieba with its dictionary loaded and its logger quiet; loaded once per process."""
    global _JIEBA
    if _JIEBA is None:
        with _JIEBA_LOCK:
            if _JIEBA is None:
                import jieba  # noqa: PLC0415 - deliberately lazy (~1 s to initialise)

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _JIEBA = jieba
    return _JIEBA


def jieba_words(text: str) -> list[str]:
    """jieba's plain segmentation (every word, stop-words and punctuation kept, in order): what a
    parser of the question's structure needs, where ``tokenize`` keeps only content terms."""
    return list(load_jieba().cut(text))


# --------------------------------------------------------------------------- #
# Tokenisation
# --------------------------------------------------------------------------- #


def s_stem(word: str) -> str:
    """Harman's S-stemmer (1991): plural folding only, and only for words of 4+ letters."""
    if len(word) < 4 or word[-1] != "s" or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith(("us", "ss", "is")):
        return word
    return word[:-1]


@functools.lru_cache(maxsize=1 << 17)
def _latin_term(raw: str) -> str:
    """One matched word as a term ("" for a stop-word). Memoised: a corpus repeats its words, and
    lower-casing and stemming each occurrence was most of a build's tokenising time."""
    tok = raw.lower()
    if "," in tok:
        tok = tok.replace(",", "")
    return "" if tok in EN_STOPWORDS else s_stem(tok)


def _latin_terms(text: str, out: list[str], keep_stopwords: bool = False) -> None:
    if not keep_stopwords:
        out.extend(filter(None, map(_latin_term, _TERM.findall(text))))  # "": a stop-word
        return
    for raw in _TERM.findall(text):
        tok = raw.lower()
        if "," in tok:
            tok = tok.replace(",", "")
        out.append(s_stem(tok))


def _han_terms(run: str, out: list[str]) -> None:
    compact = _SPACE.sub("", run)
    for tok in load_jieba().cut_for_search(compact):
        if tok in ZH_STOPWORDS or not (tok.isalnum() or any(ch.isalnum() for ch in tok)):
            continue
        # jieba passes through ASCII letters/digits glued to Han text (rare once
        # runs are split); give them the Latin treatment so they match queries.
        if not _HAN.search(tok):
            _latin_terms(tok, out)
        else:
            out.append(tok)


def _han_fallback(runs: list[str]) -> list[str]:
    """Unigrams and bigrams of the Han characters, run by run (never empty for Han text)."""
    out: list[str] = []
    for run in runs:
        chars = _HAN.findall(run)
        out.extend(chars)
        out.extend(a + b for a, b in zip(chars, chars[1:]))
    return out


def _tokens(text: str) -> tuple[list[str], list[str]]:
    """(content terms, Han runs seen). No fallback applied."""
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    if not _HAN.search(text):
        _latin_terms(text, out)
        return out, []
    runs: list[str] = []
    pos = 0
    for m in _HAN_RUN.finditer(text):
        if m.start() > pos:
            _latin_terms(text[pos:m.start()], out)
        runs.append(m.group(0))
        _han_terms(m.group(0), out)
        pos = m.end()
    if pos < len(text):
        _latin_terms(text[pos:], out)
    return out, runs


def tokenize(text: str) -> list[str]:
    """BM25 terms of ``text`` in reading order (duplicates kept: they are term frequency)."""
    out, runs = _tokens(text)
    if not out and runs:
        return _han_fallback(runs)
    return out


def is_stopword_only(text: str) -> bool:
    """True when ``text`` has nothing to search for: only stop-words, punctuation, space."""
    return not _tokens(text)[0]


def cjk_share(text: str) -> float:
    """Share of CJK characters among the non-space characters (picks a multilingual embedder)."""
    non_space = len(text) - sum(1 for ch in text if ch.isspace())
    if non_space <= 0:
        return 0.0
    return len(CJK_LETTER.findall(text)) / non_space


_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")
_LATIN_CHAR = re.compile(r"[A-Za-z\u00c0-\u024f]")


def script_of(term: str) -> str | None:
    """cjk | latin | None (digits, symbols: script-neutral)."""
    if _CJK_CHAR.search(term):
        return "cjk"
    return "latin" if _LATIN_CHAR.search(term) else None


def vocabulary_scripts(terms: Iterable[str]) -> frozenset[str]:
    """The scripts that occur among ``terms`` (as ``script_of`` names them, term by term).

    Why one search over the joined terms first: a vocabulary without CJK is settled by two regex
    searches in C instead of a Python call per term (0.3 s for the 100,000 terms of a large index,
    paid by a cold query); a term is "latin" only without CJK, so a vocabulary with CJK is walked.
    """
    terms = list(terms)
    joined = "\n".join(terms)
    if not _CJK_CHAR.search(joined):
        return frozenset({"latin"}) if _LATIN_CHAR.search(joined) else frozenset()
    found: set[str] = set()
    for t in terms:
        sc = script_of(t)
        if sc:
            found.add(sc)
            if len(found) == 2:
                break
    return frozenset(found)
