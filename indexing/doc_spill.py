"""The documents a build read, kept on disk between its two passes (JSON lines, never pickled).

Why: a build must see every document before it decides anything (``auto`` weighs the whole
collection's script; an update compares every content hash), but cannot hold 100,000 texts. The
first pass reads each file once, keeps a ``DocumentInfo`` and appends the normalised document,
headings included, here; the second pass reads them back one at a time. Re-reading the files
instead would parse PDFs and Word files twice and could see a file changed in between.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from tree_builder.document import Document, Heading
from tree_builder.markdown_headings import parse_headings
from utils.errors import IndexFormatError

SPILL = "documents.jsonl"
_HEADING_FIELDS = ("text", "marker_level", "line", "start_char", "end_char", "end_line")


class DocumentSpill:
    """Documents appended in order into ``directory`` (created by the caller, removed by ``remove``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / SPILL
        self._fh = open(self.path, "wb")
        self.count = 0

    def add(self, doc: Document) -> None:
        record = asdict(doc)
        record["headings"] = [[getattr(h, f) for f in _HEADING_FIELDS] for h in parse_headings(doc)]
        self._fh.write(json.dumps(record, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n")
        self.count += 1

    def close(self) -> None:
        self._fh.close()

    def documents(self) -> Iterator[Document]:
        """The documents in the order they were added (the file is this build's own, beside its output)."""
        self._fh.close()
        with open(self.path, "rb") as fh:
            for i, line in enumerate(fh):
                yield _document(json.loads(line), i)

    def remove(self) -> None:
        self._fh.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _document(record: Any, i: int) -> Document:
    try:
        record["headings"] = tuple(Heading(*h) for h in record["headings"])
        return Document(**record)
    except (TypeError, KeyError) as exc:  # only this build writes the file: damage, not input
        raise IndexFormatError(f"{SPILL}: document {i} cannot be read back ({exc})") from None
