"""An evaluation set directory (``docs/`` + ``qa.jsonl``) -> questions with evidence spans.

Evidence spans are character offsets in the *normalised* document text, read
through the same ``load_documents`` the indexer uses, so a span and a chunk's
``start_char``/``end_char`` always mean the same characters. An evidence text
that cannot be found verbatim is not guessed at: the item is skipped and
counted, so a broken set shows up as a number instead of as silently easier
or harder questions.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def summary_line(self) -> str:
        s = (f"{len(self.questions)} question(s) over {len(self.documents)} document(s); "
             f"{self.evidence_items - self.missing_evidence}/{self.evidence_items} evidence items located")
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
    answers = obj.get("answers", [])
    if answers is None:
        answers = []
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise _bad(line, "field 'answers' must be a list of strings")
    obj["answers"] = answers
    return obj


def load_eval_set(data_dir: Path) -> EvalSet:
    """Read and validate a set; raises InputError (one line) for a bad directory or file."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"evaluation set not found: {data_dir} is not a directory")
    docs_dir, qa_path = data_dir / DOCS_DIR, data_dir / QA_FILE
    if not docs_dir.is_dir():
        raise InputError(f"{data_dir} has no {DOCS_DIR}/ folder")
    if not qa_path.is_file():
        raise InputError(f"{data_dir} has no {QA_FILE}")
    documents, warnings = load_documents(docs_dir)
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
            spans = locate_evidence(doc.text, item["text"]) if doc is not None else ()
            if not spans:
                out.missing_evidence += 1
                if len(out.missing_examples) < 5:
                    why = "document not in docs/" if doc is None else "text not found verbatim"
                    out.missing_examples.append(f"line {line_no} ({qid}): {item['doc']}: {why}")
                continue
            located.append(Evidence(doc=item["doc"], spans=spans))
        if not located:
            out.no_evidence_questions.append(qid)
            continue
        out.questions.append(Question(
            id=qid, query=obj["query"].strip(), lang=obj.get("lang") or "",
            scope=scope, evidence=tuple(located), answers=tuple(obj["answers"]), line=line_no))
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
