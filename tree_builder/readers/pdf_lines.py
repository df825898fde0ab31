"""A PDF page's text line with the layout signals structure recovery reads (its own module: the
reader and the structure rules both use it)."""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Line:
    text: str
    size: float
    bold: bool
    y: float
    page: int
    heading: int = 0
    """0 = body; otherwise the heading's marker level."""
    x: float = 0.0
    """Left edge of the line's first run (indentation in a contents page)."""
    x_end: float = 0.0
    """Right edge of the line (its last character's origin plus half its size): with ``x``, where the
    line sits across the page, a title centred above a table, a header cell over its columns."""
    italic: bool = False
    """Most of the line is set in an italic (or oblique) font: a subheading's only mark where the body
    is roman at the same size ("Amendments to Our Certificate of Incorporation")."""
    bold_end: int = 0
    """Characters of ``text`` set in bold before the rest of the line turns regular ("Income taxes – We
    calculate ..."): a title run into its paragraph. 0 when the line does not open in bold or ends in it."""
    italic_end: int = 0
    """The same for a line that opens in italic (and not bold): "Equity investments. Fair value ..."."""
    title_end: int = 0
    """Of a heading line, the characters that are its title when its paragraph runs in after them (the
    rest opens the section's text); 0: the whole line."""

    @property
    def font(self) -> tuple[float, bool, bool]:
        """Size, weight and slant: lines in one font continue one heading, cell or label."""
        return self.size, self.bold, self.italic


CONTINUED = re.compile(r"\((?:continued|cont'?d\.?)\)\s*$|\bcontinued\s*$", re.IGNORECASE)
"""A heading repeated on the next page ("5. Revenue (Continued)") continues its section."""
NOT_TITLES = frozenset({"page", "pages", "page no", "continued", "(continued)"})
"""Words a styled line may hold that title nothing (a contents column's "Page")."""
RUNNING_TOPS = 3
"""Pages a line must open to be a running header rather than a title: the company's name atop each of
a release's table pages, a heading repeated atop the pages of its section."""
SIZE_STEP = 0.75
"""Points a line's size must exceed the body's by to be set apart by its size (a heading's font); a line
nearer the body's size than this is at the body's size."""
LINE_SPACING = 1.6
"""Lines of one paragraph stand at most this many times their size apart (baseline to baseline); a
wider gap opens a new paragraph, a title standing alone or the next cell."""

PARAGRAPH_END = (".", "!", "?", ":", ";", "。", "！", "？", "：", "；", "…", "\"", "”", ")")
"""How a line that ends its paragraph ends (a sentence's or a clause's end, a closing quote or bracket)."""


def at_line_spacing(upper: Line, lower: Line, size: float) -> bool:
    """``lower`` is the line set right under ``upper`` in a paragraph of ``size`` points (a size under
    1 point, text no reader sees, counts as 1): the next line of a wrapped heading, sentence or label."""
    return 0 < upper.y - lower.y < LINE_SPACING * max(size, 1)
