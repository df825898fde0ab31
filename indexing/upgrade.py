"""``main.py upgrade``: add to an existing file-store index what newer builds store, without a rebuild.

Today that is the stored BM25 weights (indexing/bm25_impacts.py). The command lives here, not in the
format module it writes, because it opens and rewrites a whole index (its lock, its manifest) while the
format module is read by the index loader.
"""
from __future__ import annotations

from pathlib import Path

from indexing.bm25_builder import BM25Index
from indexing.bm25_impacts import PREFIX, impact_names, write
from indexing.index_files import (METADATA, METADATA_MAX_BYTES, IndexDir, parse_manifest, replace_manifest,
                                  write_manifest_entry)
from indexing.segments import SEGMENTS
from utils.dir_lock import exclusive
from utils.errors import IndexFormatError, InputError


def upgrade(path: Path, k1: float, b: float) -> list[str]:
    """Add the impacts to a file-store index built before them, without rebuilding it; the files added.

    The new files are written under temporary names and renamed in; then ``metadata.json``, listing
    them, is replaced in one rename: a reader sees the index before or after, never between. Only new
    files are written (an index whose files are hard links to another's leaves that one unchanged).
    """
    path = Path(path)
    # the lock every build and update holds: an update renaming in its metadata.json meanwhile would
    # otherwise be replaced by this one, and its delta segment forgotten
    with exclusive(path), IndexDir(path) as files:
        meta = files.read_json(METADATA, METADATA_MAX_BYTES)
        if not isinstance(meta, dict) or not isinstance(meta.get("files"), dict):
            raise IndexFormatError(f"{path / METADATA} is not a TreeRAG index manifest")
        if "store" in meta:
            raise InputError(f"{path} keeps its postings in an engine; there is nothing to add")
        if SEGMENTS in meta:
            raise InputError(f"{path} holds delta segments; compact it (python main.py index --compact), "
                             "which writes the impacts")
        files.hold_all(parse_manifest(meta["files"], METADATA))
        if impact_names()[2] in meta["files"]:
            return []
        index = BM25Index.load(path, files=files)
        # every write goes to the directory opened above: a rebuild swapping another in cannot receive them
        here = Path(f"/proc/self/fd/{files.fd}")
        here = here if here.is_dir() else path
        written = write(index, here, PREFIX, k1, b, publish=True)
        entries = dict(meta["files"])
        for name in written:
            entries[name] = write_manifest_entry(here, name)
        new_meta = dict(meta, files=dict(sorted(entries.items())))

        def still_ours() -> None:
            if files.replaced():
                raise InputError(f"the index at {path} was replaced while it was upgraded; run upgrade again")

        replace_manifest(here, new_meta, before_rename=still_ours)
    return written
