"""The one shape every reader produces: plain text with heading lines, plus pages.

Readers append headings and paragraphs in reading order; the builder lays them
out as blank-line separated blocks (the chunker's paragraphs) and records each
heading's span and each page's first character, so tree building, chunking and
citations run the same code as for Markdown. Heading lines carry no ``#``
marks: a section deeper than the depth cap is then quoted as the file shows it.
"""
from __future__ import annotations

from tree_builder.document import Heading


class TextBuilder:
    def __init__(self) -> None:
        self._parts: list[str] = []
        self._len = 0
        self._lines = 1
        self.headings: list[Heading] = []
        self.page_starts: list[int] = []

    def _block(self, text: str) -> tuple[int, int]:
        """Append a block after a blank line; returns its (start, first line)."""
        if self._parts:
            self._parts.append("\n\n")
            self._len += 2
            self._lines += 2
        start, line = self._len, self._lines
        self._parts.append(text)
        self._len += len(text)
        self._lines += text.count("\n")
        return start, line

    def new_page(self) -> None:
        """The next block starts a new page (call once per page, before its blocks)."""
        self.page_starts.append(self._len + (2 if self._parts else 0))

    def heading(self, text: str, marker_level: int) -> None:
        text = " ".join(text.split())
        if text:
            start, line = self._block(text)
            # the span includes the newline that ends the heading line (as for Markdown)
            self.headings.append(Heading(text=text, marker_level=marker_level, line=line,
                                         start_char=start, end_char=start + len(text) + 1,
                                         end_line=line))

    def paragraph(self, text: str) -> None:
        """A block of body text; its inner line breaks are kept, blank lines are not."""
        lines = [" ".join(ln.split()) for ln in text.split("\n")]
        body = "\n".join(ln for ln in lines if ln)
        if body:
            self._block(body)

    def paragraph_lines(self, lines: list[str], page_breaks: list[int] = ()) -> None:
        """A paragraph of already normalised, non-empty lines; a new page begins at each
        line index in ``page_breaks`` (a paragraph that runs on over a page break)."""
        if not lines:
            return
        start, _ = self._block("\n".join(lines))
        offsets = [0]
        for ln in lines:
            offsets.append(offsets[-1] + len(ln) + 1)
        self.page_starts.extend(start + offsets[b] for b in page_breaks)

    def text(self) -> str:
        return "".join(self._parts) + "\n" if self._parts else ""
