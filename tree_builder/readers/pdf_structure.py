"""Heading lines of a PDF without bookmarks, in order of trust: contents page, division words, layout.

1. the document's own contents page (``pdf_toc``): each verified entry is a
   heading, at the depth its division word ("PART", "Item") or its indentation
   in the contents gives;
2. division words (``tree_builder.heading_schemes``): a heading-styled line
   that opens with "PART II", "Item 7A.", "Note 12 -", "ARTICLE IV", "第二章" is
   a structural heading at that scheme's depth, even when the contents page
   does not list it (notes to financial statements never are);
3. layout: lines set larger than the body, or bold or italic at body size (or,
   where fonts mark almost nothing, short lines in capitals: the report and
   each exhibit bound after it decide that apart), fill in below the deepest
   structural level, ranked by size, weight, number and case (a title that is
   a word the text itself spells in capitals, "APAC" or "COVID-19", ranks as
   mixed case).

What never becomes a heading: rows of the contents pages, table rows and
column headers (``pdf_tables``), a table's header cells and a statement's
row labels, the tail of a bold run-in sentence, "(Continued)" repeats,
parenthesised captions, bulleted lines, a sentence (over 80 characters
ending in a full stop, or from 50 ending in a full stop or a colon with
fewer than half of its words capitalised), a line opening in lower case (a
sentence's tail), a division word a sentence runs onto, the lines of a
paragraph set larger than the body (a press release's prose above its tables,
an exhibit set in its own font), a signature's labels (the party above
"By:", the signer's name and title under "/s/"), and in a document whose
structure starts after a cover, the cover's fields.

In a document without division words, the title atop a page that is mostly a
table (a release's statements and reconciliations, in a font smaller than
its prose) is a section whatever its font.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from tree_builder.doc_card import SUFFIX_ONLY
from tree_builder.heading_schemes import Scheme, bare_mark, is_statement_title, run_in_split, scheme_of, scheme_ranks
from tree_builder.numbering import heading_numbering
from tree_builder.readers.pdf_body_titles import body_titles, mark_title
from tree_builder.readers.pdf_lines import CONTINUED, NOT_TITLES, RUNNING_TOPS, SIZE_STEP, at_line_spacing
from tree_builder.readers.pdf_tables import is_period_words, is_table_line, mostly_table
from tree_builder.readers.pdf_toc import Contents, TocAnchor, find_contents, list_opening, read_contents

if TYPE_CHECKING:
    from tree_builder.readers.pdf_lines import Line

HEADING_MAX_CHARS = 150
_SCHEME_MAX_CHARS = 200
_ALIGN_TOLERANCE = 3.0
"""Points by which a centred line's middle may miss the text block's middle."""
_REPORT_DIVISIONS = ("part", "item")
"""A report's own divisions: what a list page further on may print above its list, and what bookmarks
are measured against."""
_COVER_MAX_PAGE = 3
"""A document whose first structural heading comes within the first pages has a cover before it."""
_INDENT_STEP = 3.0
_MIN_CAPS_HEADINGS = 3
_RUN_ON_NUMBER = re.compile(r"^\d{1,3}\.(?=[A-Z][a-z])")
"""A note number the extraction ran into its title: "1.Summary of Significant Accounting Policies"."""
_UNITS = re.compile(r"^(?:\$\s*|dollars\s+|amounts\s+)?in\s+(?:thousands|millions|billions)\b", re.IGNORECASE)
"""A table's unit caption ("In millions", "In thousands Insured ASC Total" above its columns)."""
_SENTENCE_CHARS = 80
"""A line longer than this that ends with a full stop is a sentence, whatever its font ("License fee
expense was $3 million in the current quarter ..."); a heading that ends with one is short ("Overview.")."""
_CASED_SENTENCE_CHARS = 50
"""From this length a line that ends with a full stop or a colon and capitalises fewer than half of its
words is a sentence ("The following table shows key gaming statistics for MGM China:"); a heading that
ends with a colon capitalises its words ("Fourth Quarter 2022 Financial Highlights:")."""
_LONG_WORD = re.compile(r"[A-Za-z][A-Za-z'’]{3,}")
_BULLETS = ("\u2022", "\u25cf", "\u25e6", "\u25aa", "\u2023", "\u2219")
"""A line opening with a bullet is a list item, whatever its font ("• Record Adjusted Property EBITDAR ...")."""


def body_style(pages: Sequence[Sequence["Line"]]) -> tuple[float, bool]:
    """The (size, bold) most of the text is set in."""
    weights: Counter = Counter()
    for lines in pages:
        for ln in lines:
            weights[(ln.size, ln.bold)] += len(ln.text)
    return weights.most_common(1)[0][0] if weights else (0.0, False)


def _sentence(text: str) -> bool:
    """A line that reads as a sentence, not a title (``_SENTENCE_CHARS``, ``_CASED_SENTENCE_CHARS``)."""
    if text.endswith((".", "。")) and len(text) > _SENTENCE_CHARS:
        return True
    if not text.endswith((".", ":")) or len(text) < _CASED_SENTENCE_CHARS:
        return False
    words = _LONG_WORD.findall(text)
    return bool(words) and 2 * sum(w[0].isupper() for w in words) < len(words)


def _capitals(text: str) -> bool:
    """A line in capitals ("RESULTS OF OPERATIONS"): a heading's mark where fonts carry none."""
    letters = [ch for ch in text if ch.isalpha() and ch.isascii()]
    return len(letters) >= 4 and all(ch.isupper() for ch in letters)


def _styled(ln: "Line", body_size: float, body_bold: bool) -> bool:
    return ln.size >= body_size + SIZE_STEP or (ln.bold and not body_bold) or _capitals(ln.text)


def _capital_mark(text: str) -> bool:
    """The division word is printed in capitals ("ITEM 7 - Management's Discussion ...", "NOTE 12.
    DEBT"): a heading's mark in a filing that sets its Items in the body font, found without the
    contents page that would otherwise anchor them. A sentence never spells the word so ("Item 7 of
    this report"), and a run-on line is excluded before this is asked."""
    word = text.split(maxsplit=1)[0] if text.strip() else ""
    return len(word) >= 4 and word.isascii() and word.isalpha() and word.isupper()


def _font_marked(ln: "Line", body: tuple[float, bool]) -> bool:
    """Set apart from the body by its font: larger, bold, in capitals or in italic (a division word
    must be ``_styled``; a layout heading may be italic too)."""
    return _styled(ln, *body) or ln.italic


_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]*(?:[-&][A-Z0-9]+)*\b")
_PROSE_LOWER_WORDS = 4
"""A line with this many words in lower case is running text, whatever its font."""
_ACRONYM_LINES = 2
"""Running-text lines a word must be spelt in capitals on to be the document's abbreviation or name."""


def _document_acronyms(pages: Sequence[Sequence["Line"]]) -> frozenset[str]:
    """The words the document writes in capitals inside its running text, on ``_ACRONYM_LINES`` lines or
    more ("FLNA makes, markets ...", "the COVID-19 pandemic", "non-GAAP measures"): abbreviations and
    names, whose capitals say nothing of a heading's rank. One emphasised word ("shall NOT") is not."""
    seen: Counter[str] = Counter()
    for lines in pages:
        for ln in lines:
            if sum(w[0].islower() for w in ln.text.split()) >= _PROSE_LOWER_WORDS:
                seen.update({w for w in _ACRONYM.findall(ln.text) if sum(ch.isalpha() for ch in w) >= 2})
    return frozenset(w for w, n in seen.items() if n >= _ACRONYM_LINES)


def _style(ln: "Line", acronyms: frozenset[str]) -> tuple[float, int, bool, bool]:
    """Size, weight (2 bold, 1 italic, 0 roman), case and number: in the same font a heading in capitals
    ranks above one in mixed case, and a numbered one ("5. Revenue", a note) above an unnumbered one
    ("Deferred Revenue"); at one size a bold heading ranks above an italic one. A heading that is one
    of the document's ``acronyms`` ("APAC", a segment beside "Europe") is in capitals by its
    spelling, not by its rank."""
    numbering = heading_numbering(ln.text)
    top_number = numbering is not None and numbering.family == "decimal" and numbering.depth == 1 \
        or bool(_RUN_ON_NUMBER.match(ln.text))
    caps = _capitals(ln.text) and ln.text.strip() not in acronyms
    return ln.size, 2 if ln.bold else int(ln.italic), caps, top_number


_WORD = re.compile(r"[^\W\d_]{2,}(?:[-–—'’/&.][^\W\d_]+)*")
_WORD_EDGES = "()[]“”\"'‘’,:;."


def _wordy(text: str) -> bool:
    """Most of the line's tokens are words: a title in italic ("Indefinite-Lived Intangible Assets",
    "Retail/LTC Segment (“RLS”)"), not a formula set in a mathematical italic ("Y = W x + U h + b")."""
    tokens = text.split()
    return 2 * sum(bool(_WORD.fullmatch(t.strip(_WORD_EDGES))) for t in tokens) >= len(tokens)


_NUMBERED = re.compile(r"(?P<mark>\d{1,2}\.|\d{1,2}(?:\.\d{1,2}){1,2}\.?|[A-Z]\.(?:\d{1,2}\.?)?)"
                       r"\s+(?P<title>\S.*)")
"""A line opening with a section number: "3.", "5.03", "A.", "B.2"."""
_NUMBERED_TITLE_WORDS = 8


def _numbered_title(text: str) -> bool:
    """A numbered title in the body font ("3. Performance Goals.", "6.2 Timing and Form of Benefit
    Payments.", "A. Top-Heavy Plan Definitions."): a few words, every one of four letters or more
    capitalised (as a title is and a list item's sentence is not), and no page number after it (a
    contents row); a title numbered by a letter ends in a full stop, where an initial opens a name
    ("R. Kerry Clark Director")."""
    m = _NUMBERED.fullmatch(text)
    if m is None:
        return False
    title = m.group("title")
    words = [w.strip(_WORD_EDGES) for w in title.split()]
    long = [w for w in words if len(w) >= 4]
    return len(words) <= _NUMBERED_TITLE_WORDS and bool(long) and all(w[0].isupper() for w in long) \
        and _wordy(title) and not words[-1].isdigit() and (m.group("mark")[0].isdigit() or title.endswith("."))


def _listed_numbers(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]],
                    page_styles: Sequence[tuple[float, bool]]) -> set[tuple[int, int]]:
    """Numbered titles in the body font next to another numbered line: rows of a list (an exhibit index,
    "31.1 Certification by the Chief Executive Officer." over "31.2 ..."), where a title is followed by
    its text and follows the text before it."""
    out: set[tuple[int, int]] = set()
    for p, i in chosen:
        lines = pages[p]
        ln = lines[i]
        if _font_marked(ln, page_styles[p]):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        if nxt is None or _NUMBERED.match(nxt.text) or is_table_line(nxt.text) \
                or i and _NUMBERED.match(lines[i - 1].text):
            out.add((p, i))
    return out


def layout_candidate(ln: "Line", body_size: float, body_bold: bool, capitals: bool = False) -> bool:
    """A line that looks like a heading by its font alone (and is not a table line or a caption);
    with ``capitals``, also a short line in capitals set in the body font (documents whose
    headings differ from the body by case only, or whose bold font does not say it is bold)."""
    text = ln.text
    if len(text) > HEADING_MAX_CHARS or not any(ch.isalnum() for ch in text):
        return False
    if text.endswith((",", ";", "，", "；", "、")) or text.startswith(("(", "（", *_BULLETS)):
        return False
    if ln.size >= body_size + SIZE_STEP:
        styled = not _sentence(text)
    else:
        styled = abs(ln.size - body_size) < SIZE_STEP and len(text) <= 80 and (
            (ln.bold and not body_bold or ln.italic and _wordy(text) or capitals and _capitals(text))
            and not text.endswith((".", "。", ":", "：")) or _numbered_title(text))
    return styled and text.casefold().rstrip(".") not in NOT_TITLES and not CONTINUED.search(text) \
        and not is_table_line(text) and not _UNITS.match(text) and not SUFFIX_ONLY.match(text.strip())


@dataclass
class _Structural:
    page: int
    first: int
    last: int
    scheme: str | None
    indent: float | None
    """Indentation in the contents page (None: found by its division word in the body)."""


def _table_page_labels(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Candidates on a page that is mostly a table (a financial statement), except its first and those
    a paragraph follows: bold row-group labels and column names ("Operating activities", "Retained
    Earnings") are no sections, but a page of prose under a summary table keeps its titles."""
    out: set[tuple[int, int]] = set()
    for p, lines in enumerate(pages):
        on_page = sorted(i for q, i in chosen if q == p)
        if len(on_page) >= 2 and mostly_table(lines):
            out.update((p, i) for i in on_page[1:] if not _prose_follows(lines, i))
    return out


_PROSE_CHARS = 80
"""A line longer than this that is no table line is a paragraph's (a row label is a few words)."""


def _prose_follows(lines: Sequence["Line"], i: int) -> bool:
    below = lines[i + 1] if i + 1 < len(lines) else None
    return below is not None and len(below.text) > _PROSE_CHARS and not is_table_line(below.text)


_CROWD_LINES = 10
_CROWD_SHARE = 0.6
"""A page on which the fonts mark ``_CROWD_LINES`` or more lines and ``_CROWD_SHARE`` of all its lines is
set in a font other than the document's body (an exhibit in a larger type, a list of subsidiaries):
its font marks no heading there."""


def _crowded_pages(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The candidates of pages where they are most of the lines: headings are a page's few lines."""
    per_page = Counter(p for p, _ in chosen)
    crowded = {p for p, n in per_page.items() if n >= _CROWD_LINES and n >= _CROWD_SHARE * len(pages[p])}
    return {(p, i) for p, i in chosen if p in crowded}


def _cells_and_tails(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]],
                     page_styles: Sequence[tuple[float, bool]]) -> set[tuple[int, int]]:
    """Candidates that are a table's header cell (another line shares their baseline; or, over a table
    line, period words alone, "Change" above "Year Ended December 31, 2018 vs. 2017", or a short line
    over its columns, alone or stacked) or the last line of a bold or italic sentence (a run-in caption,
    such as a risk factor, whose first line is too long to be a heading), not headings. Lines without a
    known position are left alone."""
    out: set[tuple[int, int]] = set()
    for p, i in chosen:
        lines = pages[p]
        ln = lines[i]
        if not ln.y:
            continue
        if any(k != i and abs(other.y - ln.y) < 1.0 for k, other in enumerate(lines)):
            out.add((p, i))
            continue
        stacked = _pieces_over_a_table(lines, i)
        if stacked == 0 and is_period_words(ln.text) or stacked is not None and _over_the_columns(lines, ln):
            out.add((p, i))
            continue
        if i and (p, i - 1) not in chosen:
            prev = lines[i - 1]
            if prev.font == ln.font \
                    and 0 < prev.y - ln.y < 2 * max(ln.size, 1) and _font_marked(prev, page_styles[p]):
                out.add((p, i))
    return out


_CELL_WORDS = 6
"""Most words in a header cell ("Impairment (1) Net Carrying Amount")."""


def _over_the_columns(lines: Sequence["Line"], ln: "Line") -> bool:
    """``ln`` is short and starts right of the middle of the page's text: over a table's figure columns
    ("Program" above "737 747 767 777X 787"), where no title sits: a table's title starts at the left
    margin or is centred, and so starts left of the middle."""
    placed = [other for other in lines if other.x_end]  # not a title inserted from the outline
    if not placed or len(ln.text.split()) > _CELL_WORDS:
        return False
    return ln.x > (min(other.x for other in placed) + max(other.x_end for other in placed)) / 2


_STACK_LINES = 4
"""Most lines a header cell is stacked over ("Total" / "Restructuring" / "Costs")."""


def _pieces_over_a_table(lines: Sequence["Line"], i: int) -> int | None:
    """How many more pieces of a header cell line ``i`` heads before a table line right below the last
    (0: the table line is right below ``i``; "Total" / "Restructuring" / "Costs" stack two more, each
    under the last in its font and near its left edge), or None when no table line follows so."""
    ln, last = lines[i], lines[i]
    for k in range(i + 1, min(i + 1 + _STACK_LINES, len(lines))):
        nxt = lines[k]
        if not 0 < last.y - nxt.y < 2.5 * max(ln.size, 1):
            return None
        if is_table_line(nxt.text):
            return k - i - 1
        if (nxt.size, nxt.bold) != (ln.size, ln.bold) or abs(nxt.x - ln.x) > 4 * max(ln.size, 1) \
                or len(nxt.text.split()) > _CELL_WORDS:
            return None
        last = nxt
    return None


def _sentence_tails(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Candidates that open in lower case: a title opens with a capital or a number, and a line that
    does not is a sentence's tail left alone by a page break or a formula ("multiplied by (ii) the",
    "the Company.", "ii. are appropriately tailored ..."), unless it is numbered in lower-case letters.
    Taken out after the other rules, which read such lines as parts of the paragraphs around them."""
    return {(p, i) for p, i in chosen
            if pages[p][i].text[:1].islower() and not _LETTERED_TITLE.match(pages[p][i].text)}


_LETTERED_TITLE = re.compile(r"^(?:[a-z]|[ivx]{1,5})[.)]\s+[A-Z0-9“\"]")
"""A title numbered in lower-case letters: "a. Elections To Receive Restricted Stock Units"."""


_SIGNED_BY = re.compile(r"^by\b\s*[:/_]", re.IGNORECASE)
"""The line a signature opens with: "By: /s/ Mary N. Dillon", "BY:", "By /s/ ...", "By ______"."""
_SIGNED = re.compile(r"/\s*s\s*/", re.IGNORECASE)
"""A conformed signature: "/s/ JEFFREY C. CAMPBELL", "By: / S / LARRY J. MERLO"."""
_SIGNATURE_LINES = 3
"""Lines a signature's label (a party's name, the signer's name and title) runs to."""


def _signature_labels(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Candidates that label a signature, no titles: the party named above it ("EXECUTIVE", "APPROVED",
    "HARTFORD LIFE AND ACCIDENT INSURANCE" / "COMPANY" over "By: /s/ ...") and the signer's name and
    title under it ("/s/ JEFFREY C. CAMPBELL" over "Jeffrey C. Campbell" / "Vice Chairman and Chief
    Financial Officer"): the candidates next to the signature's line, in one font at line spacing, up to
    three lines (a title after the signer's, "POWER OF ATTORNEY", stands apart)."""
    out: set[tuple[int, int]] = set()
    for p, lines in enumerate(pages):
        for i, ln in enumerate(lines):
            if (p, i) in chosen:
                continue
            steps = ((-1,) if _SIGNED_BY.match(ln.text) else ()) + ((1,) if _SIGNED.search(ln.text) else ())
            for step in steps:  # the party above "By:", the signer below "/s/"
                k = i + step
                font = lines[k].font if 0 <= k < len(lines) else None
                while 0 <= k < len(lines) and (p, k) in chosen and abs(k - i) <= _SIGNATURE_LINES \
                        and lines[k].font == font \
                        and (k == i + step
                             or at_line_spacing(lines[min(k, k - step)], lines[max(k, k - step)], lines[k].size)):
                    out.add((p, k))
                    k += step
    return out


_FULL_LINE = 0.6
"""A line shorter than this share of the measure ends its paragraph (or is a title standing alone); a
paragraph's other lines fill the measure. The measure is the length of the page's lines in that size
at three quarters of their range: most lines of a page of prose are full, and one line that ran two
columns together is no measure."""


def _continues(prev: "Line", ln: "Line", full: float) -> bool:
    """``ln`` is the next line of ``prev``'s paragraph: ``prev`` fills the measure (``full``
    characters or more), ``ln`` is in the same size at line spacing, and in the same weight or a
    sentence running on in lower case (a bold dateline, then the rest of the sentence in regular).
    A short line after a sentence's end is a title of its own ("Plan History" under a paragraph)."""
    return len(prev.text) >= full and ln.size == prev.size and at_line_spacing(prev, ln, ln.size) \
        and (ln.bold == prev.bold or ln.text[:1].islower()) \
        and not (prev.text.endswith((".", "!", "?", ":", "。")) and len(ln.text) < full)


def _measures(lines: Sequence["Line"]) -> dict[float, int]:
    """The page's measure in each font size (``_FULL_LINE``)."""
    lengths: dict[float, list[int]] = {}
    for ln in lines:
        lengths.setdefault(ln.size, []).append(len(ln.text))
    return {size: sorted(ns)[(3 * len(ns)) // 4] for size, ns in lengths.items()}


def _runs_on(lines: Sequence["Line"], i: int) -> bool:
    """Line ``i`` carries on the sentence of the line above it: that line, in the same font at line
    spacing, fills the measure and breaks off mid-sentence, after a word in lower case or a comma
    ("... as to the timing and form of payment under" / "Section 6.1(F)), without regard to ...").
    The page's measure is taken only for such a line (few pages have one)."""
    if not i:
        return False
    prev, ln = lines[i - 1], lines[i]
    last = prev.text.rstrip()[-1:]
    return (last.islower() or last == ",") and prev.bold == ln.bold \
        and _continues(prev, ln, _FULL_LINE * _measures(lines)[ln.size])


def _prose_runs(pages: Sequence[Sequence["Line"]], chosen: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Candidates that are lines of a paragraph set larger than the body, not headings: a run of
    lines that continue one another (``_continues``), some of them candidates, that together run
    past ``HEADING_MAX_CHARS``. A press release sets its prose in 12 points above tables in 10, so
    the tables' size is the body's and every line of its prose looked like a heading; a heading
    wrapped over two lines stays within that length, and a title above a paragraph in its own font
    is shorter than the paragraph's lines."""
    out: set[tuple[int, int]] = set()
    for p in sorted({q for q, _ in chosen}):
        lines = pages[p]
        measure = _measures(lines)
        run: list[int] = []
        for i in range(len(lines) + 1):
            if run and i < len(lines) and _continues(lines[i - 1], lines[i], _FULL_LINE * measure[lines[i].size]):
                run.append(i)
                continue
            if len(run) > 1 and sum(len(lines[k].text) for k in run) > HEADING_MAX_CHARS:
                out.update((p, k) for k in run if (p, k) in chosen)
            run = [i]
    return out


_TITLE_MAX_CHARS = 400
"""A table page's title may run over several lines ("RECONCILIATIONS OF LAS VEGAS STRIP RESORTS NET
REVENUES TO ..."), longer than a heading set in a larger font."""


def _table_page_titles(pages: Sequence[Sequence["Line"]], skip: set[int]) -> list[tuple[int, int, int]]:
    """(page, first, last) of the title atop each page that is mostly a table: the lines in bold or
    capitals that open the page, after a line that opens many such pages (the company's name) and
    before the first caption, column header or row ("(In thousands)", "Three Months Ended").
    Why: a press release's statements and reconciliations follow its prose in a smaller font, so no
    font marks their titles, and without them the last section of the prose ran over all the tables."""
    blocks: dict[int, list[int]] = {}
    for p, lines in enumerate(pages):
        if p in skip or not mostly_table(lines):
            continue
        block: list[int] = []
        for i, ln in enumerate(lines):
            text = ln.text.strip()
            if not (ln.bold or _capitals(text)) or text.startswith(("(", "（")) or is_table_line(text) \
                    or not any(ch.isalpha() for ch in text):
                break
            block.append(i)
        if block:
            blocks[p] = block
    tops = Counter(pages[p][i].text.strip().casefold() for p, block in blocks.items() for i in block)
    out: list[tuple[int, int, int]] = []
    for p, block in blocks.items():
        title = [i for i in block if tops[pages[p][i].text.strip().casefold()] < RUNNING_TOPS]
        if title and title == list(range(title[0], title[-1] + 1)) \
                and sum(len(pages[p][i].text) for i in title) <= _TITLE_MAX_CHARS \
                and not CONTINUED.search(pages[p][title[-1]].text):
            out.append((p, title[0], title[-1]))
    return out


def _body_scheme_headings(pages: Sequence[Sequence["Line"]], skip_pages: set[int], taken: set[tuple[int, int]],
                          body_size: float, body_bold: bool) -> list[_Structural]:
    found: list[_Structural] = []
    last_title = ""
    middle = _text_middle(pages)
    for p, lines in enumerate(pages):
        end = len(lines)
        if p in skip_pages:
            # a list page in the body (Item 8 printed over its index of the statements) keeps the
            # PART and Item headings above its list; the contents page in front, before any, keeps none
            if not any(q < p for q, _ in taken) and not any(s.scheme in _REPORT_DIVISIONS for s in found):
                continue
            end = list_opening(lines)
        i = 0
        while i < end:
            ln = lines[i]
            sc = scheme_of(ln.text) if (p, i) not in taken else None
            if sc is not None and p in skip_pages and sc.name not in _REPORT_DIVISIONS:
                sc = None  # an exhibit's "ARTICLE I" over its own contents list is one of the list's rows
            if sc is None or len(ln.text) > _SCHEME_MAX_CHARS or is_table_line(ln.text) or CONTINUED.search(ln.text) \
                    or sc.name != "statement" and not _under_heading(found, taken, lines, p, i) and _runs_on(lines, i) \
                    or not (_styled(ln, body_size, body_bold) or _page_top_title(lines, i, sc, last_title)
                            or sc.name != "statement" and _capital_mark(ln.text)):
                i += 1
                continue
            if sc.name in ("statement", "exhibit"):
                last_title = ln.text.strip().casefold()
            j = i
            # a long division title wrapped onto the next line in the same font (a statement's whole
            # title is complete: the company line under it is no part of it, unlike a line that reads
            # on in lower case, "on the Audited Consolidated Financial Statements")
            while j + 1 < end and len(lines[j].text) >= 40 and (p, j + 1) not in taken \
                    and (not is_statement_title(lines[j].text) or lines[j + 1].text[:1].islower()) \
                    and (lines[j + 1].size, lines[j + 1].bold) == (ln.size, ln.bold) \
                    and at_line_spacing(lines[j], lines[j + 1], ln.size) \
                    and not _centred_alone(middle, lines[j], lines[j + 1]) \
                    and scheme_of(lines[j + 1].text) is None and len(lines[j + 1].text) <= HEADING_MAX_CHARS:
                j += 1
            if sum(len(lines[k].text) for k in range(i, j + 1)) > _SCHEME_MAX_CHARS:
                j = i  # a paragraph run in after its mark ("Section 3.02. Authorization. Seller has ..."), no title
            found.append(_Structural(p, i, j, sc.name, None))
            i = j + 1
    return found


def _text_middle(pages: Sequence[Sequence["Line"]]) -> float:
    """The middle of the text block: halfway between where most lines start and where full lines end."""
    starts = sorted(ln.x for lines in pages for ln in lines if ln.x_end)
    ends = sorted(ln.x_end for lines in pages for ln in lines if ln.x_end)
    if not starts:
        return 0.0
    return (starts[len(starts) // 10] + ends[(9 * len(ends)) // 10]) / 2


def _centred_alone(middle: float, a: "Line", b: "Line") -> bool:
    """``b`` is centred under a title ``a`` that is not: a company line centred under a left-set
    "Item 1. Financial Statements (unaudited)", no wrapped tail of it (a hanging indent's tail starts
    right of its title's edge too, but is not centred)."""
    def centred(ln: "Line") -> bool:
        return abs((ln.x + ln.x_end) / 2 - middle) <= _ALIGN_TOLERANCE

    return bool(b.x_end) and centred(b) and b.x > a.x + _ALIGN_TOLERANCE and not centred(a)


def _under_heading(found: Sequence[_Structural], taken: set[tuple[int, int]], lines: Sequence["Line"],
                   p: int, i: int) -> bool:
    """The line above is a division heading ("Part I - Financial Information" over "Item 1.
    Financial Statements"): a line under a title carries on no sentence of it, however much of the
    measure the title fills. A heading whose paragraph runs in after it ("Section 2.2
    Administration. The Plan shall be ... as more fully described in") is no such title."""
    return (p, i - 1) in taken or bool(found) and (found[-1].page, found[-1].last) == (p, i - 1) \
        and found[-1].first == found[-1].last and run_in_split(lines[i - 1].text) is None


_EXHIBIT_TOP_LINES = 3
"""An exhibit's mark prints among the first lines left on its first page (above or beside its title)."""


def _page_top_title(lines: Sequence["Line"], i: int, sc: Scheme, last_title: str) -> bool:
    """A statement's whole title opening its page, in the body font ("Consolidated Balance Sheets" above
    a company line in capitals, as General Mills prints its statements), or an exhibit's bare mark near
    the top of its first page ("Exhibit 10.13"): the page's title, though unstyled. The same title as the
    one before it heads the next page of that statement (or exhibit)."""
    text = lines[i].text
    if text.strip().casefold() == last_title:
        return False
    if i == 0 and is_statement_title(text):
        return True
    return i < _EXHIBIT_TOP_LINES and sc.name == "exhibit" and bare_mark(text)


def _markers(structural: list[_Structural]) -> list[int]:
    """Marker level of each structural heading (document order): division words by their
    scheme's rank; a contents entry without one one level below the division entry above it
    when indented further, beside it otherwise; without any division word, by indentation."""
    ranks = scheme_ranks({s.scheme for s in structural if s.scheme})
    indents = sorted({round(s.indent / _INDENT_STEP) for s in structural
                      if s.indent is not None and s.scheme is None})
    out: list[int] = []
    last_division: tuple[int, float | None] | None = None
    for s in structural:
        if s.scheme:
            out.append(ranks[s.scheme])
            last_division = (ranks[s.scheme], s.indent)
        elif not ranks:
            out.append(1 + indents.index(round((s.indent or 0.0) / _INDENT_STEP)))
        elif last_division is None:
            out.append(1)
        else:
            level, indent = last_division
            deeper = indent is not None and s.indent is not None and s.indent > indent + _INDENT_STEP
            out.append(level + 1 if deeper else level)
    return out


_OWN_STYLE_CHARS = 2_000
"""Text an exhibit needs to be read on its own terms; a shorter one (a certification) is read as the report."""


def _exhibit_spans(pages: Sequence[Sequence["Line"]], structural: Sequence[_Structural]) -> list[tuple[int, int]]:
    """The pages (start, end) of each exhibit bound after a report that is long enough to be read on its
    own terms: from the page its mark opens to the next exhibit's. An exhibit is a document of its own,
    set in its own font and marking its headings its own way."""
    starts = sorted({s.page for s in structural if s.scheme == "exhibit" and s.first < _EXHIBIT_TOP_LINES})
    return [(a, b) for a, b in zip(starts, starts[1:] + [len(pages)])
            if sum(len(ln.text) for lines in pages[a:b] for ln in lines) >= _OWN_STYLE_CHARS]


def _exhibit_styles(pages: Sequence[Sequence["Line"]], spans: Sequence[tuple[int, int]],
                    report: tuple[float, bool]) -> list[tuple[float, bool]]:
    """The body style (size, bold) each page is read against: an exhibit's own (``spans``) where it is
    larger than the report's, the report's elsewhere. Against the report's body, every line of an
    exhibit set larger (a concession contract in 11 pt behind a report in 9 pt) was larger than the body,
    each clause a heading. A smaller one (a list of subsidiaries in 8 pt) keeps the report's: an exhibit
    whose mark is not found would be read against it too."""
    out = [report] * len(pages)
    for a, b in spans:
        own = body_style(pages[a:b])
        if own[0] > report[0]:
            out[a:b] = [own] * (b - a)
    return out


def _reading_parts(n_pages: int, spans: Sequence[tuple[int, int]]) -> list[list[int]]:
    """The pages whose fonts are judged together: the report's (every page outside ``spans``, a short
    exhibit's included), then each exhibit's."""
    inside = {p for a, b in spans for p in range(a, b)}
    report = [p for p in range(n_pages) if p not in inside]
    return ([report] if report else []) + [list(range(a, b)) for a, b in spans]


_OUTLINE_SHARE = 0.5
"""Bookmarks fewer than this share of the PARTs and Items the document prints are no outline of it."""


def _printed_divisions(pages: Sequence[Sequence["Line"]]) -> int:
    """The PARTs and Items a document prints: listed on its contents page, else heading its lines."""
    contents_pages, entries = find_contents(pages)
    divisions = sum(1 for e in entries if e.scheme in _REPORT_DIVISIONS)
    if not divisions:
        body_size, body_bold = body_style(pages)
        divisions = sum(1 for s in _body_scheme_headings(pages, set(contents_pages), set(), body_size, body_bold)
                        if s.scheme in _REPORT_DIVISIONS)
    return divisions


def _nests_below_items(entries: Sequence[tuple[int, str, int, float | None]]) -> bool:
    """Some bookmark sits under an Item's ("Segments" under "Item 1. Business")."""
    item_level: int | None = None
    for level, title, *_ in entries:
        sc = scheme_of(title)
        if sc is not None and sc.name == "item":
            item_level = level
        elif item_level is not None and level > item_level:
            return True
        elif item_level is not None and level <= item_level:
            item_level = None
    return False


def outline_poorer(pages: Sequence[Sequence["Line"]],
                   entries: Sequence[tuple[int, str, int, float | None]]) -> bool:
    """The bookmarks are no better outline than the contents page, division words and fonts give:

    - fewer than half the PARTs and Items the document prints: they mark the parts a filing was
      bound from ("10-K", "Exhibit 21", "Exhibit 23") or a few pages, not its sections;
    - its PARTs and Items and nothing under them, while the document prints as many: below the
      bookmarks only titles in bold or italic body type would be read, and an MD&A's subsections,
      the statements and the notes fell side by side under their Item (fan-outs over 100).

    Bookmarks that nest a report's sections, or a release's or a paper's (which print no Item), stay."""
    divisions = _printed_divisions(pages)
    if not divisions:
        return False
    if len(entries) < _OUTLINE_SHARE * divisions:
        return True
    bookmarked = sum(1 for _, title, *_ in entries if (sc := scheme_of(title)) and sc.name in _REPORT_DIVISIONS)
    return bookmarked > 0 and not _nests_below_items(entries) and divisions >= bookmarked


def mark_structure_headings(pages: list[list["Line"]], anchored: bool = True) -> Contents:
    """Set ``Line.heading`` (marker level) on the heading lines of ``pages``; returns the contents
    list found (its pages hold no heading). ``anchored=False`` ignores the contents list's entries
    (not its pages): the tree of a file whose contents page is not found."""
    body_size, body_bold = body_style(pages)
    contents = read_contents(pages, body_size)
    if not anchored:
        contents = Contents([], [], [], contents.list_pages)
    contents_pages = contents.list_pages
    anchors: list[TocAnchor] = contents.anchors
    structural = [_Structural(a.page, a.first, a.last, a.scheme, a.indent) for a in anchors]
    taken = {(s.page, i) for s in structural for i in range(s.first, s.last + 1)}
    structural += _body_scheme_headings(pages, contents_pages, taken, body_size, body_bold)
    undivided = not any(s.scheme not in (None, "statement", "exhibit") for s in structural)
    if undivided:
        # a statement's title divides an Item's financial statements; in a document of no other
        # division words it is a heading like any other, placed by its font (and it is no cover's end)
        structural = [s for s in structural if s.scheme != "statement"]
    structural.sort(key=lambda s: (s.page, s.first))
    markers = _markers(structural)
    for s, marker in zip(structural, markers):
        for i in range(s.first, s.last + 1):
            pages[s.page][i].heading = marker
    taken = {(s.page, i) for s in structural for i in range(s.first, s.last + 1)}
    deepest = max(markers, default=0)

    start = (0, 0)  # layout headings before this point are a cover's fields
    if contents.pages:
        start = (max(contents.pages) + 1, 0)
    elif structural and structural[0].page <= _COVER_MAX_PAGE:
        start = (structural[0].page, structural[0].first)

    spans = _exhibit_spans(pages, structural)
    page_styles = _exhibit_styles(pages, spans, (body_size, body_bold))

    def chosen_lines(capitals: bool, part: list[int]) -> set[tuple[int, int]]:
        return {(p, i) for p in part if p not in contents_pages
                for i, ln in enumerate(pages[p])
                if (p, i) >= start and (p, i) not in taken and layout_candidate(ln, *page_styles[p], capitals)}

    chosen: set[tuple[int, int]] = set()
    for part in _reading_parts(len(pages), spans):  # the report and each exhibit decide apart
        found = chosen_lines(False, part)
        if len(found) < len(part) // 2:  # fonts mark almost no heading here: capitals may
            found = chosen_lines(True, part)
        chosen |= found
    chosen -= _table_page_labels(pages, chosen)
    chosen -= _prose_runs(pages, chosen)
    chosen -= _cells_and_tails(pages, chosen, page_styles)
    chosen -= _crowded_pages(pages, chosen)
    chosen -= _sentence_tails(pages, chosen)
    chosen -= _signature_labels(pages, chosen)
    chosen -= _listed_numbers(pages, chosen, page_styles)
    titled = body_titles(pages, page_styles, _reading_parts(len(pages), spans), taken | chosen)
    acronyms = _document_acronyms(pages)
    own: dict[tuple[int, int], tuple[float, int, bool, bool]] = {}
    # each heading's style, read once; numbers rank only below division words (a filing's notes),
    # never among a paper's "1 Introduction" and "Abstract"
    for p, i in chosen:
        size, weight, caps, numbered = _style(pages[p][i], acronyms)
        own[(p, i)] = (size, weight, caps, numbered and deepest > 0)
    used = Counter(own.values())

    def style(at: tuple[int, int]) -> tuple[float, int, bool, bool]:
        # capitals or numbers make a level of their own only when they recur
        size, weight, caps, numbered = st = own[at]
        return st if not (caps or numbered) or used[st] >= _MIN_CAPS_HEADINGS else (size, weight, False, False)

    styles = sorted({style(at) for at in chosen},
                    key=lambda st: (-st[0], -st[1], not st[3], not st[2]))
    rank = {st: deepest + k + 1 for k, st in enumerate(styles)}
    if undivided:  # a table page's title, whatever its font, at the top level of the layout's headings
        for p, first, last in _table_page_titles(pages, contents_pages):
            if not any((p, i) in chosen or (p, i) in taken for i in range(first, last + 1)) and (p, first) >= start:
                for i in range(first, last + 1):
                    pages[p][i].heading = deepest + 1
                    taken.add((p, i))
    lowest = max(rank.values(), default=deepest) + 1
    for t in titled:
        if (t.page, t.first) >= start and not any((t.page, i) in taken for i in range(t.first, t.last + 1)):
            mark_title(pages, t, lowest)
            taken.update((t.page, i) for i in range(t.first, t.last + 1))
    for p, lines in enumerate(pages):
        for k, ln in enumerate(lines):
            if (p, k) in taken:
                continue
            if (p, k) in chosen:
                ln.heading = rank[style((p, k))]
            elif k and lines[k - 1].heading and (p, k - 1) not in taken and (p, k) >= start \
                    and p not in contents_pages and _font_marked(lines[k - 1], page_styles[p]) \
                    and ln.font == lines[k - 1].font \
                    and at_line_spacing(lines[k - 1], ln, ln.size) and len(ln.text) <= HEADING_MAX_CHARS \
                    and not is_table_line(ln.text):
                ln.heading = lines[k - 1].heading  # the wrapped tail of a heading ("）", "Time)")
    return contents


def relevel_flat_outline(entries: list[tuple[int, str, int, float | None]]
                         ) -> list[tuple[int, str, int, float | None]]:
    """Bookmarks all at one level that name divisions ("Part II", "Item 7", "Note 3") get the
    divisions' depths: a flat list of 100 bookmarks is no outline. An entry without a division word
    goes one level below the division entry above it. Nested bookmarks keep their nesting, but a
    division nested deeper than its word says is raised (``raise_deep_divisions``)."""
    if len({level for level, *_ in entries}) != 1:
        return raise_deep_divisions(entries)
    schemes = [scheme_of(title) for _, title, _, _ in entries]
    ranks = scheme_ranks({sc.name for sc in schemes if sc is not None})
    if len(ranks) < 2:
        return entries
    out: list[tuple[int, str, int, float | None]] = []
    above = 0
    for (_, title, page, top), sc in zip(entries, schemes):
        if sc is not None:
            above = ranks[sc.name]
            out.append((above, title, page, top))
        else:
            out.append((above + 1, title, page, top))
    return out


def raise_deep_divisions(entries: list[tuple[int, str, int, float | None]]
                         ) -> list[tuple[int, str, int, float | None]]:
    """Nested bookmarks whose division words sit deeper than their rank below the division they lie
    in ("Item 8" > "Notes to Consolidated Financial Statements" > "NOTE 1.", the note at depth 4)
    are raised to that rank's depth (the note at 3, beside the statements), with everything nested
    under them: a filing read through its contents page gets the same tree, and the depth cap
    (``max_depth``, 3) no longer folds every note into one section. Never deeper, never other entries."""
    schemes = [scheme_of(title) for _, title, _, _ in entries]
    ranks = scheme_ranks({sc.name for sc in schemes if sc is not None})
    out: list[tuple[int, str, int, float | None]] = []
    divisions: list[tuple[int, int]] = []  # (rank level, new level) of the division entries it lies in
    shift: list[tuple[int, int]] = []  # (original level, delta) of raised entries still open
    for (level, title, page, top), sc in zip(entries, schemes):
        while shift and level <= shift[-1][0]:
            shift.pop()
        new = level - (shift[-1][1] if shift else 0)
        while divisions and divisions[-1][1] >= new:  # the divisions it lies in, none it follows
            divisions.pop()
        if sc is None:
            out.append((new, title, page, top))
            continue
        rank = ranks[sc.name]
        above = next(((r, lv) for r, lv in reversed(divisions) if r < rank), None)
        if above is not None and new > above[1] + rank - above[0]:
            shift.append((level, new - (above[1] + rank - above[0]) + (shift[-1][1] if shift else 0)))
            new = above[1] + rank - above[0]
            while divisions and divisions[-1][1] >= new:
                divisions.pop()
        divisions.append((rank, new))
        out.append((new, title, page, top))
    return out
