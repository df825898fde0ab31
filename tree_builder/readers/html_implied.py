"""HTML with its optional end tags written out, so the standard-library parser builds the page's tree.

Why: ``</td>``, ``</tr>``, ``</li>``, ``</p>``, ``</dt>``, ``</dd>`` and ``</option>`` may be
omitted in valid HTML, and ``html.parser`` (through BeautifulSoup) does not know which start tag
closes which element: it nests every row inside the previous one and every list item inside the
one before. A table of 4,000 such rows then became one element 4,000 deep whose every row
contains all later rows (quadratic text, gigabytes), and a list of 600 items looked nested too
deep to read. This pass replays the HTML standard's implied end tags (the subset that matters to
text: paragraphs, list items, definition terms, table rows, cells and sections, headings) on the
tokenizer's events and writes the markup back with every element closed where the browser
closes it. One pass, linear in the input; the text and attributes are copied as written.
"""
from __future__ import annotations

from html import escape
from html.parser import HTMLParser

VOID = frozenset("area base br col embed hr img input keygen link meta param source track wbr".split())
"""Elements without content or end tag: never pushed on the stack of open elements."""

_SCOPE = frozenset("html table td th caption template object applet marquee button".split())
"""Where a search for an element to close implicitly stops (the standard's "scope" boundaries)."""

_CLOSES_P = frozenset(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption figure footer "
    "form h1 h2 h3 h4 h5 h6 header hgroup hr li dd dt main menu nav ol p pre section summary table ul "
    "listing plaintext xmp".split())
"""A start tag of one of these closes an open ``<p>`` (in button scope)."""

_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())
_RAW_TEXT = frozenset({"script", "style"})

_IMPLIED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # start tag: (open elements it closes, elements that stop the search besides _SCOPE)
    "li": (frozenset({"li"}), frozenset({"ul", "ol", "menu", "dir"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "tr": (frozenset({"tr"}), frozenset({"thead", "tbody", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr"})),
    "thead": (frozenset({"thead", "tbody", "tfoot"}), frozenset()),
    "tbody": (frozenset({"thead", "tbody", "tfoot"}), frozenset()),
    "tfoot": (frozenset({"thead", "tbody", "tfoot"}), frozenset()),
    "caption": (frozenset({"caption", "colgroup", "thead", "tbody", "tfoot", "tr"}), frozenset()),
    "colgroup": (frozenset({"colgroup"}), frozenset()),
    "option": (frozenset({"option"}), frozenset({"select", "datalist"})),
    "optgroup": (frozenset({"option", "optgroup"}), frozenset({"select"})),
}
# a table cell (td/th) is a scope boundary for what starts inside it, but a new cell or row closes it
_CELL_CLOSERS = frozenset({"td", "th", "tr", "thead", "tbody", "tfoot"})


class TooDeep(Exception):
    """More elements open at once than the reader allows (``max_html_depth``)."""


class ImpliedEndTags(HTMLParser):
    """Feed HTML text, ``close()``, then ``markup()``: the same HTML with the implied end tags written.

    Each search for an element to close looks up the nearest open element of each name it cares
    about (an index per name) instead of walking the stack, so a tag costs the same at any depth;
    and more than ``max_depth`` open elements stop the pass with ``TooDeep``.
    """

    def __init__(self, max_depth: int) -> None:
        super().__init__(convert_charrefs=True)
        self._out: list[str] = []
        self._open: list[str] = []
        self._where: dict[str, list[int]] = {}
        """Each open element's name -> its positions in ``_open``, innermost last."""
        self._limit = max_depth
        self.max_depth = 0
        """The deepest nesting of open elements seen once the implied end tags are applied."""

    # ---- the stack of open elements
    def _push(self, tag: str) -> None:
        self._where.setdefault(tag, []).append(len(self._open))
        self._open.append(tag)

    def _close_to(self, index: int) -> None:
        """Close the open elements from the top down to (and including) ``index``."""
        while len(self._open) > index:
            name = self._open.pop()
            self._where[name].pop()
            self._out.append(f"</{name}>")

    def _last(self, name: str) -> int:
        where = self._where.get(name)
        return where[-1] if where else -1

    def _boundary(self, stops: frozenset[str], cell_scope: bool) -> int:
        """Position of the innermost open element a search must not pass (-1: none)."""
        scope = max((self._last(n) for n in _SCOPE if not (cell_scope and n in ("td", "th"))), default=-1)
        return max(scope, max((self._last(n) for n in stops), default=-1))

    def _find(self, names: frozenset[str], stops: frozenset[str], cell_scope: bool) -> int:
        """Position of the innermost open element named in ``names``, or -1 past a boundary."""
        found = max((self._last(n) for n in names), default=-1)
        return found if found >= 0 and found >= self._boundary(stops, cell_scope) else -1

    def _before_start(self, tag: str) -> None:
        if tag in _CLOSES_P:
            i = self._find(frozenset({"p"}), frozenset(), cell_scope=False)
            if i >= 0:
                self._close_to(i)
        if tag in _HEADINGS and self._open and self._open[-1] in _HEADINGS:
            self._close_to(len(self._open) - 1)
        rule = _IMPLIED.get(tag)
        if rule is not None:
            names, stops = rule
            i = self._find(names, stops, cell_scope=tag in _CELL_CLOSERS or tag == "caption")
            if i >= 0:
                self._close_to(i)

    # ---- tokenizer events
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._before_start(tag)
        self._out.append(self.get_starttag_text() or f"<{tag}>")
        if tag not in VOID:
            self._push(tag)
            if len(self._open) > self.max_depth:
                self.max_depth = len(self._open)
                if self.max_depth > self._limit:
                    raise TooDeep(self.max_depth)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._before_start(tag)
        self._out.append(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        at = self._last(tag)
        if at < 0:
            return  # no such open element: dropped
        crosses = tag in _SCOPE or tag in _CELL_CLOSERS or tag in ("ul", "ol", "dl", "select")
        if not crosses and self._boundary(frozenset(), cell_scope=False) > at:
            return  # an end tag with nothing to close in its scope is ignored, as browsers do
        self._close_to(at)

    def handle_data(self, data: str) -> None:
        # the tokenizer has decoded character references; written back escaped, so the parser that
        # reads this markup decodes the same text (script and style content is raw, as it came)
        raw = bool(self._open) and self._open[-1] in _RAW_TEXT
        self._out.append(data if raw else escape(data, quote=False))

    def handle_comment(self, data: str) -> None:
        self._out.append(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._out.append(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._out.append(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self._out.append(f"<![{data}]>")

    def markup(self) -> str:
        """The markup written so far, with every element still open closed at the end."""
        self._close_to(0)
        return "".join(self._out)


def with_implied_end_tags(html: str, max_depth: int) -> tuple[str, int]:
    """``html`` with its implied end tags written out, and its element depth once they are;
    ``TooDeep`` past ``max_depth`` open elements."""
    parser = ImpliedEndTags(max_depth)
    parser.feed(html)
    parser.close()
    return parser.markup(), parser.max_depth
