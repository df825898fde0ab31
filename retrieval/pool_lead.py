"""What the context reads first of a ranked list: the named statements from their top, then the row
that states the asked figure.

Ranking scores a chunk by the words it shares with the question; a table is mostly figures, so the
chunks a figure question needs rank below the sentences that talk about the same quantity:

- **A named statement from its top.** "Using the statement of cash flows and the income statement,
  what is the FY2018-FY2020 average capex as a % of revenue?": the ranked list holds both statements,
  but the chunks it ranks first are whichever rows and footers share the question's words ("The
  accompanying notes are an integral part of these consolidated financial statements"), and in 2,000
  characters the context read five pieces of the cash flow statement and the other statement's footer.
  A person told to use a statement opens it at its top, where its title and the column header of
  periods stand. So each section titled as a statement the question names (``named_sections``), among
  the sections of the pool's first ``LEAD_DEPTH`` hits, is read from its first chunk, in the order the
  pool reaches them.
- **The row that states the figure.** "How much has the effective tax rate of Corning changed between
  FY2021 and FY2022?": the list of the right filing puts the sentences about the effective tax rate
  first and the MD&A row that states it ("Effective tax rate 23% 20%", under a "2022 2021" header)
  17th. A person looking for a figure runs an eye down the row labels of the tables in front of them.
  So, for a question that asks for a quantity, the hit among the pool's first ``LEAD_DEPTH`` whose
  span holds the best row (``figure_rows.figures_in``: the label matched with the question's words,
  a header naming the asked period) is read first of all. Only rows of the documents the question
  names are read (``extractive.named_documents``: another company's row states another company's figure).

- **The rows a measure is computed from.** "Does Corning have positive working capital?": no row prints
  it; the answer computes it from "Total current assets" and "Total current liabilities"
  (``derived_figures``), and the liabilities lie a page below the balance sheet's title. Of the
  statement the measure belongs to (per document the first section so titled among those of the
  pool's first ``LEAD_DEPTH`` hits), the chunks holding the two rows are read after the row lead.

They move hits that the list already holds near its top, or chunks of the sections those hits are in;
the rest keep their order. They are reading
rules for whatever list is read, so every evaluation arm's context gets them, flat or tree; the ranked
list step 2 reports is left as it is.
"""
from __future__ import annotations

from typing import Sequence

from config import Config
from indexing.index_store import Index
from retrieval.derived_figures import asked_measure, part_row, read_periods
from retrieval.extractive import continued_sections, leaf_text, named_documents, rows_stating
from retrieval.figure_rows import asks_quantity
from retrieval.named_sections import named_kinds, titled_as, titled_leaf
from retrieval.query import Query
from retrieval.types import RetrievedChunk

LEAD_DEPTH = 20
"""How far down the pool a named statement or a row is looked for: about the hits an 8,000-character
context reads. Deeper, a lead would read what retrieval itself ranked low."""


def lead_pool(question: Query, pool: Sequence[RetrievedChunk], index: Index | None,
              config: Config) -> list[RetrievedChunk]:
    """``pool`` as the context reads it: the named statements from their top, the rows an asked
    measure is computed from, then the row that states the asked figure before everything."""
    return row_lead(question, measure_rows(question, named_starts(question, pool, index), index), index, config)


def measure_rows(question: Query, pool: Sequence[RetrievedChunk], index: Index | None,
                 depth: int = LEAD_DEPTH) -> list[RetrievedChunk]:
    """``pool`` with the chunks that hold the two rows an asked measure is computed from
    (``derived_figures``: "Total current assets" and "Total current liabilities" for working capital)
    moved first, read from the statement the measure belongs to: per document the first section so
    titled among those of the pool's first ``depth`` hits (as the answer reads it). A balance sheet's
    liabilities lie a page below its title; the context that reads the statement from its top would
    not reach them."""
    out = list(pool)
    measure = asked_measure(question.text) if index is not None else None
    periods = read_periods(question.text) if measure is not None else None
    if measure is None or periods is None:
        return out
    statement = measure.kinds
    named = named_documents(question, index)
    sections: dict[str, tuple[int, RetrievedChunk]] = {}  # per document: its first titled section reached
    for rc in out[:depth]:
        c = rc.chunk
        if named is not None and c.doc_path not in named or not titled_as(statement, c.section_title):
            continue
        rows = index.leaf_rows.get(c.source_node_id)
        if rows is not None and (c.doc_path not in sections or rows[0] < sections[c.doc_path][0]):
            sections[c.doc_path] = (rows[0], rc)
    held = {rc.chunk.chunk_id: rc for rc in out}
    lead: list[RetrievedChunk] = []
    for _, rc in sections.values():
        leaves = [(x, index.leaf_rows.get(x)) for x in continued_sections(index, rc.chunk.source_node_id)]
        texts = [(t, rows) for x, rows in leaves if rows is not None and rows[1] > rows[0]
                 and (t := leaf_text(index, index.chunks[rows[0]])) is not None]
        for part in (measure.first, measure.second):
            r = next((r for (content, base), rows in texts
                      if (r := _row_chunk(index, content, base, rows, part, periods)) is not None), None)
            if r is not None:
                lead.append(_section_hit(index, r, rc, held))
    moved = {rc.chunk.chunk_id for rc in lead}
    return list({rc.chunk.chunk_id: rc for rc in lead}.values()) + [rc for rc in out if rc.chunk.chunk_id not in moved]


def named_starts(question: Query, pool: Sequence[RetrievedChunk], index: Index | None,
                 depth: int = LEAD_DEPTH) -> list[RetrievedChunk]:
    """``pool`` with the first chunk of each section titled as a statement the question names (of the
    sections of its first ``depth`` hits, in the order it reaches them) moved first."""
    out = list(pool)
    kinds = named_kinds(question.text) if index is not None else []
    if not kinds:
        return out
    # each titled section's best hit (its position), per document and kind, in the order the pool reaches them
    reached: dict[tuple[str, str], list[tuple[int, str, float]]] = {}
    seen: set[str] = set()
    for i, rc in enumerate(out[:depth]):
        leaf, title = rc.chunk.source_node_id, rc.chunk.section_title
        if leaf in seen:
            continue
        seen.add(leaf)
        for kind in kinds:
            if titled_as([kind], title):
                reached.setdefault((rc.chunk.doc_path, kind.name), []).append((i, title, -i))
    # of one document's sections titled as one statement, the statement itself (its title says
    # "Consolidated"), not a note or schedule of the same name ("Statement of Cash Flows" supplements)
    kind_of = {k.name: k for k in kinds}
    picked = (titled_leaf(kind_of[name], found) for (_, name), found in reached.items())
    named = [out[i] for i in sorted(i for i in picked if i is not None)]
    if not named:
        return out
    held = {rc.chunk.chunk_id: rc for rc in out}
    starts: list[RetrievedChunk] = []
    for rc in named:
        rows = index.leaf_rows.get(rc.chunk.source_node_id)
        if rows is None or rows[1] <= rows[0]:
            continue
        starts.append(_section_hit(index, rows[0], rc, held))
    moved = {rc.chunk.chunk_id for rc in starts}
    return starts + [rc for rc in out if rc.chunk.chunk_id not in moved]


def _section_hit(index: Index, row: int, rc: RetrievedChunk, held: dict[str, RetrievedChunk]) -> RetrievedChunk:
    """Chunk ``row`` of the section of hit ``rc`` as a hit: the list's own when it holds it, else read
    with the standing of its section's hit."""
    chunk = index.chunks[row]
    return held.get(chunk.chunk_id) or RetrievedChunk(chunk, rc.score, rc.retrieval_detail, row, rc.sub_query,
                                                      rc.source)


def _row_chunk(index: Index, content: str, base: int, rows: tuple[int, int], part: str,
               periods: list[str]) -> int | None:
    """The chunk (its row number) of a leaf (``content`` at ``base``, chunks ``rows``) that holds the
    row stating ``part``: one holding the whole row first."""
    f = part_row(content, [(0, len(content))], part, periods)
    if f is None:
        return None
    a, b = base + f.start, base + f.end
    over = [r for r in range(*rows) if index.chunks[r].start_char < b and index.chunks[r].end_char > a]
    whole = [r for r in over if index.chunks[r].start_char <= a and index.chunks[r].end_char >= b]
    return (whole or over or [None])[0]


def row_lead(question: Query, pool: Sequence[RetrievedChunk], index: Index | None,
             config: Config, depth: int = LEAD_DEPTH) -> list[RetrievedChunk]:
    """``pool`` with the hit holding the row that best states the asked figure moved first (the
    better-ranked one of equally good rows); unchanged when the question asks for no quantity or no
    hit holds such a row."""
    out = list(pool)
    if index is None or not asks_quantity(question.text):
        return out
    named = named_documents(question, index)
    idf: dict[str, dict[str, float]] = {}
    best: tuple[float, int] | None = None
    for i, rc in enumerate(out[:depth]):
        c = rc.chunk
        if named is not None and c.doc_path not in named:
            continue
        leaf = leaf_text(index, c)
        if leaf is None:
            continue
        content, base = leaf
        found = [f for f in rows_stating(question, content, (c.start_char - base, c.end_char - base), c, index,
                                         config, idf) if f.fits]
        if found and (best is None or found[0].score > best[0]):
            best = (found[0].score, i)
    if best is None or best[1] == 0:
        return out
    return [out[best[1]]] + out[:best[1]] + out[best[1] + 1:]
