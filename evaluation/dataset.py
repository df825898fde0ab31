"""An evaluation set directory (``docs/`` + ``qa.jsonl``) -> questions with evidence spans.

Evidence spans are character offsets in the *normalised* document text, read
through the same readers the indexer uses, so a span and a chunk's
``start_char``/``end_char`` always mean the same characters. An evidence text
that cannot be found verbatim is not guessed at: unless the item names its page
(``page``, 1-based, for documents with pages), it is skipped and counted, so a
broken set shows up as a number instead of as silently easier or harder questions.

An item with a ``page`` whose text a changed reader no longer yields verbatim is
placed on that page instead (``place_on_page``): its text, or the annotators'
``source_text``, matched within the page with whitespace ignored, else the whole
page. How every item was placed is counted (``EvalSet.placements``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tree_builder.decoding import normalise_text
from tree_builder.loader import load_documents
from tree_builder.document import Document
from utils.errors import InputError
from utils.bounded_read import read_bounded

QA_FILE = "qa.jsonl"
QA_MAX_BYTES = 512 * 1024 * 1024
"""A question file is read whole: bounded (and checked to be a regular file) like every input."""
DOCS_DIR = "docs"

Span = tuple[int, int]


@dataclass(frozen=True)
class Evidence:
    doc: str
    spans: tuple[Span, ...]
    """Every occurrence of the evidence text in the document (usually one).

    A text that occurs twice is the same evidence wherever a chunk finds it,
    so all occurrences count; which one the annotator meant is unknowable.
    """
    page: int | None = None
    """The annotators' page (1-based physical page), when the set gives one."""
    page_span: Span | None = None
    """That page's characters in the document (None: no page given, or the document has no such page)."""
    placed: str = "verbatim"
    """How the item was placed: one of PLACEMENTS."""


@dataclass(frozen=True)
class Question:
    id: str
    query: str
    lang: str
    scope: tuple[str, ...] | None
    """Documents the question is asked of; None = the whole set."""
    evidence: tuple[Evidence, ...]
    """Only the items found in their document (others are counted in EvalSet)."""
    answers: tuple[str, ...] = ()
    line: int = 0
    """Line in qa.jsonl (1-based), for messages."""
    labels: tuple[tuple[str, str], ...] = ()
    """(field, value) of the set's question labels (LABEL_FIELDS) this question carries."""


@dataclass
class EvalSet:
    path: Path
    docs_dir: Path
    documents: list[Document]
    questions: list[Question]
    """Questions with at least one located evidence item, in file order."""
    total_lines: int = 0
    evidence_items: int = 0
    missing_evidence: int = 0
    """Evidence items not found verbatim (after normalisation) and therefore skipped."""
    missing_examples: list[str] = field(default_factory=list)
    no_evidence_questions: list[str] = field(default_factory=list)
    """Ids of questions left without any located evidence (not scored)."""
    warnings: list[str] = field(default_factory=list)
    placements: dict[str, int] = field(default_factory=dict)
    """How the located evidence items were placed (PLACEMENTS -> count)."""

    @property
    def has_pages(self) -> bool:
        """Some located evidence item names a page of its document (page@B is defined)."""
        return any(e.page_span is not None for q in self.questions for e in q.evidence)

    def placement_text(self) -> str:
        """``80 verbatim, 3 source-text, 2 page`` (nonzero counts in PLACEMENTS order)."""
        return ", ".join(f"{self.placements[p]} {p}" for p in PLACEMENTS if self.placements.get(p))

    def summary_line(self) -> str:
        s = (f"{len(self.questions)} question(s) over {len(self.documents)} document(s); "
             f"{self.evidence_items - self.missing_evidence}/{self.evidence_items} evidence items located")
        if any(self.placements.get(p) for p in PLACEMENTS[1:]):
            s += f" ({self.placement_text()})"
        if self.missing_evidence:
            s += f", {self.missing_evidence} not found verbatim (skipped)"
        if self.no_evidence_questions:
            s += f"; {len(self.no_evidence_questions)} question(s) without located evidence (not scored)"
        return s


def find_all(text: str, needle: str) -> tuple[Span, ...]:
    """Every (possibly overlapping) occurrence of ``needle`` in ``text``."""
    out: list[Span] = []
    if not needle:
        return ()
    pos = text.find(needle)
    while pos != -1:
        out.append((pos, pos + len(needle)))
        pos = text.find(needle, pos + 1)
    return tuple(out)


def locate_evidence(doc_text: str, evidence_text: str) -> tuple[Span, ...]:
    """Spans of an evidence text in a normalised document; () when it is not there.

    The evidence is normalised like the document (BOM, CR/CRLF). Surrounding
    whitespace is not part of any chunk's span either, so a second try drops it.
    """
    text = normalise_text(evidence_text)
    spans = find_all(doc_text, text)
    if not spans and text.strip() != text:
        spans = find_all(doc_text, text.strip())
    return spans


PLACEMENTS = ("verbatim", "text-on-page", "source-text", "page")
"""verbatim: the item's text found in the document as read today; text-on-page / source-text: not
verbatim, but its text / the annotators' ``source_text`` found within its page with whitespace
ignored; page: neither, so the whole page is the evidence."""

LABEL_FIELDS = ("question_type", "question_reasoning")
"""Question labels a set may carry (FinanceBench's); each string value is a slice of the questions."""


def page_span(page_starts: list[int], text_len: int, page: int) -> Span | None:
    """The characters of 1-based ``page``; None when the document has no such page."""
    if not 1 <= page <= len(page_starts):
        return None
    end = page_starts[page] if page < len(page_starts) else text_len
    return (page_starts[page - 1], end)


def find_ignoring_space(text: str, needle: str) -> Span | None:
    """The span of ``text`` that equals ``needle`` once all whitespace is removed from both
    (first occurrence), trimmed to non-space characters; None when there is none.

    A changed reader moves line breaks and spaces (columns, table cells) far more often than it
    changes the characters themselves, so this is what survives of an annotator's text.
    """
    return SpaceFree.of(text).find(needle)


@dataclass(frozen=True)
class SpaceFree:
    """A text with its whitespace removed and, per remaining character, its offset in the text:
    built once, searched for many needles (a page searched for each of its chunks)."""

    compact: str
    where: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> "SpaceFree":
        where = tuple(i for i, ch in enumerate(text) if not ch.isspace())
        return cls("".join(text[i] for i in where), where)

    def find(self, needle: str) -> Span | None:
        """``needle``'s span in the original text, whitespace ignored on both sides; None if absent."""
        target = "".join(needle.split())
        pos = self.compact.find(target) if target else -1
        if pos < 0:
            return None
        return (self.where[pos], self.where[pos + len(target) - 1] + 1)


def place_on_page(doc_text: str, span: Span, candidates: list[str]) -> tuple[tuple[Span, ...], int]:
    """Spans of the first candidate text found within the page ``span`` (whitespace ignored) and
    its position in ``candidates``; ((span,), len(candidates)) when none is: the whole page."""
    page = SpaceFree.of(doc_text[span[0]:span[1]])
    for i, cand in enumerate(candidates):
        found = page.find(normalise_text(cand)) if cand else None
        if found is not None:
            return ((span[0] + found[0], span[0] + found[1]),), i
    return (span,), len(candidates)


def _bad(line: int, msg: str) -> InputError:
    return InputError(f"{QA_FILE} line {line}: {msg}")


def _str_field(obj: dict[str, Any], key: str, line: int, required: bool = True) -> str | None:
    if key not in obj or obj[key] is None:
        if required:
            raise _bad(line, f"field {key!r} is missing")
        return None
    value = obj[key]
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(line, f"field {key!r} must be a non-empty string")
    return value


def _parse_line(raw: str, line: int) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _bad(line, f"not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise _bad(line, "not a JSON object")
    qid = obj.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        obj["id"] = str(qid)
    _str_field(obj, "id", line)
    _str_field(obj, "query", line)
    _str_field(obj, "lang", line, required=False)
    scope = obj.get("scope")
    if scope is not None:
        if (not isinstance(scope, list) or not scope
                or not all(isinstance(s, str) and s.strip() for s in scope)):
            raise _bad(line, "field 'scope' must be a non-empty list of document paths")
    evidence = obj.get("evidence")
    if not isinstance(evidence, list):
        raise _bad(line, "field 'evidence' must be a list")
    for i, item in enumerate(evidence, 1):
        if (not isinstance(item, dict) or not isinstance(item.get("doc"), str)
                or not isinstance(item.get("text"), str) or not item["text"].strip()):
            raise _bad(line, f"evidence item {i} must be an object with string 'doc' and non-empty 'text'")
        page = item.get("page")
        if page is not None and (not isinstance(page, int) or isinstance(page, bool) or page < 1):
            raise _bad(line, f"evidence item {i}: 'page' must be a page number (1 or more)")
        if item.get("source_text") is not None and not isinstance(item["source_text"], str):
            raise _bad(line, f"evidence item {i}: 'source_text' must be a string")
    answers = obj.get("answers", [])
    if answers is None:
        answers = []
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise _bad(line, "field 'answers' must be a list of strings")
    obj["answers"] = answers
    return obj


ReadDocuments = Callable[[Path], tuple[list[Document], list[str]]]
"""docs/ folder -> (documents in the loader's order, warnings): how a set's documents are read."""


def place_item(doc: Document, item: dict[str, Any]) -> Evidence | None:
    """An evidence item placed in its document (see the module docstring); None when it cannot be."""
    spans = locate_evidence(doc.text, item["text"])
    page = item.get("page")
    pspan = page_span(doc.page_starts, len(doc.text), page) if page is not None else None
    if spans:
        return Evidence(doc=doc.path, spans=spans, page=page, page_span=pspan)
    if pspan is None:
        return None
    spans, which = place_on_page(doc.text, pspan, [item["text"], item.get("source_text") or ""])
    return Evidence(doc=doc.path, spans=spans, page=page, page_span=pspan,
                    placed=("text-on-page", "source-text", "page")[which])


def _labels(obj: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((f, obj[f].strip()) for f in LABEL_FIELDS
                 if isinstance(obj.get(f), str) and obj[f].strip())


def load_eval_set(data_dir: Path, read: ReadDocuments | None = None) -> EvalSet:
    """Read and validate a set; raises InputError (one line) for a bad directory or file.

    ``read``: how the documents are read (an evaluation passes a cached reader, so the
    documents it then indexes are these very ones); default ``load_documents``."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"evaluation set not found: {data_dir} is not a directory")
    docs_dir, qa_path = data_dir / DOCS_DIR, data_dir / QA_FILE
    if not docs_dir.is_dir():
        raise InputError(f"{data_dir} has no {DOCS_DIR}/ folder")
    if not qa_path.is_file():
        raise InputError(f"{data_dir} has no {QA_FILE}")
    documents, warnings = (read or load_documents)(docs_dir)
    by_path = {d.path: d for d in documents}
    data = read_bounded(qa_path, limit=QA_MAX_BYTES, what=f"{data_dir}/{QA_FILE}", setting="a question file")
    try:
        raw_lines = data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{QA_FILE} is not UTF-8 text") from None

    out = EvalSet(path=data_dir, docs_dir=docs_dir, documents=documents, questions=[],
                  warnings=list(warnings))
    seen: dict[str, int] = {}
    for line_no, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        out.total_lines += 1
        obj = _parse_line(raw, line_no)
        qid = obj["id"]
        if qid in seen:
            raise _bad(line_no, f"duplicate id {qid!r} (first on line {seen[qid]})")
        seen[qid] = line_no
        scope = tuple(dict.fromkeys(obj["scope"])) if obj.get("scope") else None
        for s in scope or ():
            if s not in by_path:
                raise _bad(line_no, f"scope document {s!r} is not in {DOCS_DIR}/")
        located: list[Evidence] = []
        seen_items: set[tuple[str, str]] = set()
        for item in obj["evidence"]:
            key = (item["doc"], item["text"])
            if key in seen_items:  # the same item listed twice is one item
                continue
            seen_items.add(key)
            out.evidence_items += 1
            doc = by_path.get(item["doc"])
            placed = place_item(doc, item) if doc is not None else None
            if placed is None:
                out.missing_evidence += 1
                if len(out.missing_examples) < 5:
                    why = ("document not in docs/" if doc is None else "text not found verbatim"
                           + ("" if item.get("page") is None else f" and page {item['page']} not in the document"))
                    out.missing_examples.append(f"line {line_no} ({qid}): {item['doc']}: {why}")
                continue
            out.placements[placed.placed] = out.placements.get(placed.placed, 0) + 1
            located.append(placed)
        if not located:
            out.no_evidence_questions.append(qid)
            continue
        out.questions.append(Question(
            id=qid, query=obj["query"].strip(), lang=obj.get("lang") or "",
            scope=scope, evidence=tuple(located), answers=tuple(obj["answers"]), line=line_no,
            labels=_labels(obj)))
    if out.total_lines == 0:
        raise InputError(f"{QA_FILE} in {data_dir} has no questions")
    return out


def sample_questions(questions: list[Question], limit: int | None, seed: int) -> list[Question]:
    """A reproducible random sample, kept in file order.

    A seeded permutation's prefix is taken, so a larger ``limit`` with the same
    seed contains the smaller sample (results cached for it are reused).
    """
    if limit is None or limit >= len(questions):
        return list(questions)
    if limit < 1:
        raise InputError(f"--limit must be at least 1 (got {limit})")
    order = np.random.default_rng(seed).permutation(len(questions))[:limit]
    return [questions[i] for i in sorted(order.tolist())]
