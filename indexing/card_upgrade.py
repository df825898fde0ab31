"""Document cards for an index built before them (``main.py upgrade``), read from the index itself.

A card is read from a document's first pages (``tree_builder.doc_card``); an index keeps every
section's heading and text, so the start of each document is there to read again: its nodes in
order, heading and text, up to ``COVER_CHARS``. No document is opened and nothing is embedded, so
this costs a few node records per document. The page breaks are not stored, so the card reads a
fixed length of the start instead of the first two pages.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from indexing.index_files import IndexDir, replace_manifest
from indexing.index_files import METADATA, METADATA_MAX_BYTES
from indexing.index_store import Index, load_index
from tree_builder.doc_card import COVER_CHARS, read_card
from utils.dir_lock import exclusive
from utils.errors import IndexFormatError, InputError


def cover_text(index: Index, number: int) -> str:
    """The start of document ``number`` as the index holds it: its sections' headings and texts in order."""
    tree = index.tree
    parts: list[str] = []
    size = 0
    for row in sorted(int(r) for r in tree.document_rows(number)):
        node = tree.node(row)
        for piece in (node.heading if node.kind == "section" else "", node.content):
            if piece:
                parts.append(piece)
                size += len(piece) + 1
        if size >= COVER_CHARS:
            break
    return "\n".join(parts)[:COVER_CHARS]


def add_cards(path: Path) -> int:
    """Add a card to every document entry of ``metadata.json`` that has none; how many were added.

    The new metadata is written beside the old and renamed over it (``replace_manifest``), under the
    lock every build holds."""
    path = Path(path)
    with exclusive(path), IndexDir(path) as files:
        meta: Any = files.read_json(METADATA, METADATA_MAX_BYTES)
        docs = meta.get("documents") if isinstance(meta, dict) else None
        if not isinstance(docs, list):
            raise IndexFormatError(f"{path / METADATA} is not a TreeRAG index manifest")
        missing = [i for i, d in enumerate(docs) if isinstance(d, dict) and "card" not in d]
        if not missing:
            return 0
        index = load_index(path)
        numbers = {p: i for i, p in enumerate(index.tree.doc_paths)}
        new_docs = list(docs)
        for i in missing:
            d = docs[i]
            number = numbers.get(d.get("path"))
            if number is None:
                continue
            card = read_card(cover_text(index, number), str(d.get("title", "")), str(d["path"]))
            new_docs[i] = {**d, "card": card.record()}
        here = Path(f"/proc/self/fd/{files.fd}")
        here = here if here.is_dir() else path

        def still_ours() -> None:
            if files.replaced():
                raise InputError(f"the index at {path} was replaced while it was upgraded; run upgrade again")

        replace_manifest(here, dict(meta, documents=new_docs), before_rename=still_ours)
    return sum(1 for i in missing if "card" in new_docs[i])
