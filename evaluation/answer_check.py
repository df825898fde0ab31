"""Does the offline (no-LLM) answer state the reference figure?

    python -m evaluation.answer_check --data ../shared/bench/financebench-dev --index DIR [--json OUT]
        [--embedder NAME] [--limit N] [--only ID ...]

Each question of the set is asked of the index without an LLM (the default pipeline, as
``main.py query`` runs it). A question is *checkable* when its reference answer states a figure
(years and period labels do not count) that its labelled evidence page also states: the evidence
item's text, the annotators' own extraction (``source_text``) and the index's text of the
labelled page (its chunks on that page). The figure is the
share of checkable questions whose answer quotes state one of those figures, numbers
normalised (``$1,577 million`` = ``1577`` = ``1.577 billion``; rounding as the reference prints
it; see ``evaluation.figures``). The answer's quotes are read, not its citations, so a page
number or a file name's year never counts as a figure.

The checkable questions are split by whether the answer step's context (the passages it read)
reaches a labelled evidence page: a miss where it does not is retrieval's, not the answer step's.

Only the index is read; the set's documents are not opened. The per-question records (the
answer's first quote, which figures were looked for, and whether the first quote came from a
document that holds evidence) go to ``--json``, for reading the misses.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from evaluation.dataset import QA_FILE, QA_MAX_BYTES
from evaluation.figures import Figure, contains_figure, reference_figures
from utils.bounded_read import read_bounded
from utils.errors import InputError, TreeRAGError


@dataclass(frozen=True)
class CheckQuestion:
    id: str
    query: str
    evidence_docs: tuple[str, ...]
    evidence_text: str
    """The labelled evidence: each item's text and the annotators' extraction, one after another."""
    answers: tuple[str, ...]
    question_type: str = ""
    pages: tuple[tuple[str, int], ...] = ()
    """(document, 1-based page) of each evidence item that names its page."""


@dataclass
class CheckResult:
    id: str
    question_type: str
    figures: list[str] = field(default_factory=list)
    """Reference figures the labelled evidence also states (empty: the question is not checkable)."""
    answered: bool = False
    """The answer's quotes state one of ``figures``."""
    first_quote: str = ""
    first_read: str = ""
    quote_in_evidence_doc: bool = False
    mode: str = ""
    context_on_evidence_page: bool | None = None
    """Whether a passage the answer step read lies on a labelled evidence page (None: the question
    names no page). A miss without it is retrieval's: the answer step never saw the page."""


def read_questions(data: Path) -> list[CheckQuestion]:
    """``qa.jsonl`` of an evaluation set; a malformed line is a one-line error naming it."""
    qa = data / QA_FILE
    if not qa.is_file():
        raise InputError(f"{data}: no {QA_FILE} (an evaluation set directory holds docs/ and {QA_FILE})")
    raw = read_bounded(qa, limit=QA_MAX_BYTES, what=str(qa), setting="a question file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{qa} is not UTF-8 text") from None
    out: list[CheckQuestion] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            ev = q.get("evidence") or []
            out.append(CheckQuestion(
                str(q["id"]), str(q["query"]),
                tuple(str(e["doc"]) for e in ev),
                "\n".join(str(e.get("text", "")) + "\n" + str(e.get("source_text", "")) for e in ev),
                tuple(str(a) for a in q.get("answers") or []), str(q.get("question_type") or ""),
                tuple((str(e["doc"]), int(e["page"])) for e in ev if isinstance(e.get("page"), int))))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{qa} line {n}: not a question record ({type(exc).__name__}: {exc})") from None
    return out


def page_text(index: Any, doc: str, page: int) -> str:
    """The index's text of one page of a document: its chunks that lie on that page, one after another."""
    rows = index.doc_rows.get(doc)
    if rows is None:
        return ""
    chunks = index.chunks[rows[0]:rows[1]]
    return "\n".join(c.text for c in chunks if c.page_start <= page <= max(c.page_end, c.page_start))


def checkable_figures(q: CheckQuestion, pages: str = "") -> list[Figure]:
    """Reference figures that the labelled evidence (or its pages' text, ``pages``) states too."""
    refs = [f for a in q.answers for f in reference_figures(a)]
    where = q.evidence_text + "\n" + pages
    return [f for f in refs if contains_figure(where, f)]


def quotes_text(record: dict[str, Any]) -> str:
    """What the answer states: its quotes' texts (or its text when it has no quotes), no citations."""
    quotes = record.get("answer_quotes") or []
    if quotes:
        return "\n".join(str(q.get("text", "")) for q in quotes)
    return str(record.get("answer", ""))


def read_evidence_page(q: CheckQuestion, record: dict[str, Any]) -> bool | None:
    """Whether the answer step's context (the passages it read) reaches a labelled evidence page."""
    if not q.pages:
        return None
    passages = (record.get("context") or {}).get("passages") or []
    for p in passages:
        a = p.get("page_start")
        if not isinstance(a, int):
            continue
        b = p.get("page_end") if isinstance(p.get("page_end"), int) else a
        if any(doc == p.get("doc_path") and a <= page <= max(a, b) for doc, page in q.pages):
            return True
    return False


def check_one(q: CheckQuestion, record: dict[str, Any], pages: str = "") -> CheckResult:
    refs = checkable_figures(q, pages)
    res = CheckResult(q.id, q.question_type, [f.literal for f in refs], mode=str(record.get("answer_mode") or ""),
                      context_on_evidence_page=read_evidence_page(q, record))
    said = quotes_text(record)
    res.answered = any(contains_figure(said, f) for f in refs)
    quotes = record.get("answer_quotes") or []
    if quotes:
        res.first_quote = str(quotes[0].get("text", ""))[:300]
        res.first_read = str(quotes[0].get("read") or "")
        res.quote_in_evidence_doc = quotes[0].get("doc_path") in q.evidence_docs
    return res


def summarise(results: Sequence[CheckResult]) -> dict[str, Any]:
    checkable = [r for r in results if r.figures]
    by_type: dict[str, list[CheckResult]] = defaultdict(list)
    for r in checkable:
        by_type[r.question_type or "-"].append(r)
    read = [r for r in checkable if r.context_on_evidence_page]
    unread = [r for r in checkable if r.context_on_evidence_page is False]
    return {
        "questions": len(results),
        "checkable": len(checkable),
        "answered": sum(r.answered for r in checkable),
        "context_on_evidence_page": {"checkable": len(read), "answered": sum(r.answered for r in read)},
        "context_off_evidence_page": {"checkable": len(unread), "answered": sum(r.answered for r in unread)},
        "share": round(sum(r.answered for r in checkable) / len(checkable), 4) if checkable else None,
        "first_quote_in_evidence_doc": round(sum(r.quote_in_evidence_doc for r in results) / len(results), 4)
        if results else None,
        "by_question_type": {t: {"checkable": len(rs), "answered": sum(r.answered for r in rs)}
                             for t, rs in sorted(by_type.items())},
    }


def run(data: Path, index_dir: Path, embedder: str | None = None, limit: int | None = None,
        only: Sequence[str] = ()) -> tuple[dict[str, Any], list[CheckResult]]:
    from pipeline import TreeRAG  # noqa: PLC0415 (loads models lazily; --help stays fast)

    questions = read_questions(data)
    if only:
        questions = [q for q in questions if q.id in set(only)]
    if limit is not None:
        questions = questions[:limit]
    rag = TreeRAG.open(index_dir, llm=None, embedder=embedder, long_running=True)
    results: list[CheckResult] = []
    for i, q in enumerate(questions, 1):
        record = rag.run(q.query).to_dict()
        res = check_one(q, record, "\n".join(page_text(rag.index, d, p) for d, p in q.pages))
        results.append(res)
        mark = "-" if not res.figures else ("yes" if res.answered else "no")
        print(f"[{i}/{len(questions)}] {q.id}: {mark} {res.first_quote[:90]!r}", file=sys.stderr, flush=True)
    return summarise(results), results


def format_summary(s: dict[str, Any]) -> str:
    lines = [f"questions {s['questions']}; checkable (reference figure on the evidence page) {s['checkable']}; "
             f"answer states it {s['answered']}" + (f" ({s['share']:.0%})" if s["share"] is not None else "")]
    on, off = s["context_on_evidence_page"], s["context_off_evidence_page"]
    lines.append(f"  the context read an evidence page: {on['answered']} of {on['checkable']}; "
                 f"it did not (retrieval's miss): {off['answered']} of {off['checkable']}")
    for t, v in s["by_question_type"].items():
        lines.append(f"  {t}: {v['answered']} of {v['checkable']}")
    if s["first_quote_in_evidence_doc"] is not None:
        lines.append(f"first quote from a document holding evidence: {s['first_quote_in_evidence_doc']:.0%} "
                     f"of {s['questions']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluation.answer_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, type=Path, help="evaluation set directory (docs/ + qa.jsonl)")
    p.add_argument("--index", required=True, type=Path, help="an index of the set's documents")
    p.add_argument("--embedder", default=None, help="query embedder (default: the index's)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--only", nargs="*", default=(), help="only these question ids")
    p.add_argument("--json", type=Path, default=None, help="write the summary and per-question records here")
    args = p.parse_args(argv)
    try:
        if args.limit is not None and args.limit < 1:
            raise InputError("--limit must be at least 1")
        summary, results = run(args.data, args.index, args.embedder, args.limit, args.only)
        print(format_summary(summary))
        if args.json is not None:
            from utils.atomic import atomic_write_text  # noqa: PLC0415

            atomic_write_text(args.json, json.dumps({"summary": summary, "questions": [asdict(r) for r in results]},
                                                    ensure_ascii=False, indent=1))
    except TreeRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
