"""The contract between reading a file and building its tree: a normalised Document and its Headings.

Every reader (Markdown, text, PDF, Word, HTML) produces a Document; the tree
builder reads nothing else. Kept free of imports from the rest of the package
so readers, heading parsers and the tree builder can all depend on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from utils.errors import InputError


class EmptyDocumentError(InputError):
    """A document with no non-blank body text (skipped inside a folder, fatal alone)."""


@dataclass(frozen=True)
class Heading:
    text: str
    """Heading text with inline Markdown removed and whitespace collapsed."""
    marker_level: int
    """Number of ``#`` for ATX; 1 for a ``===`` and 2 for a ``---`` setext underline."""
    line: int
    """1-based line of the heading's first line in the normalised document."""
    start_char: int
    end_char: int
    """[start, end) of the heading line(s) including the final newline (setext: both lines)."""
    end_line: int = 0
    """1-based last line of the heading (differs from ``line`` for setext headings)."""


@dataclass
class Document:
    """One Markdown source after normalisation (BOM stripped, CRLF/CR -> LF)."""

    path: str
    """Relative to the input folder (or the file name)."""
    text: str
    title: str
    content_hash: str
    front_matter: dict = field(default_factory=dict)
    body_start: int = 0
    """Character offset where the body begins (after YAML front matter)."""
    kind: str = "md"
    """Source format: md | txt | pdf | docx | html (what the folder summary counts)."""
    headings: Optional[tuple] = None
    """Headings a reader found itself (PDF, Word, HTML, plain text); None: parse the Markdown."""
    page_starts: list[int] = field(default_factory=list)
    """Offset in ``text`` where each page begins (page 1 first); empty for sources without pages."""


@dataclass(frozen=True)
class DocumentInfo:
    """What a build keeps of a document once its text is dropped: the plan and metadata.json need
    no more, so a collection's documents are never held whole (a few hundred bytes each)."""

    path: str
    title: str
    content_hash: str
    chars: int
    kind: str
    pages: int
    cjk_weight: float = 0.0
    """CJK share of the text times its length (what ``auto`` weighs; 0 when not computed)."""
    card: dict | None = field(default=None, hash=False)
    """What the document's first pages say it is (``tree_builder.doc_card``), as plain JSON."""

    @classmethod
    def of(cls, doc: Document, cjk: bool = False) -> "DocumentInfo":
        """``cjk``: weigh the text's script too (a pass over every character: only for ``auto``)."""
        weight = 0.0
        if cjk:
            from utils.tokenizer import cjk_share  # noqa: PLC0415 - the tokenizer's tables cost start-up (config imports this module); only auto needs it

            weight = cjk_share(doc.text) * len(doc.text)
        from tree_builder.doc_card import read_card  # noqa: PLC0415

        card = read_card(doc.text, doc.title, doc.path, doc.page_starts).record()
        return cls(doc.path, doc.title, doc.content_hash, len(doc.text), doc.kind, len(doc.page_starts), weight,
                   card)

    def record(self) -> dict:
        """Its entry in metadata.json's ``documents`` (an index built before cards has no ``card``)."""
        out = {"path": self.path, "title": self.title, "content_hash": self.content_hash,
               "chars": self.chars, "kind": self.kind, "pages": self.pages}
        if self.card:
            out["card"] = self.card
        return out
