"""The index directory a build replaces: refusing what it must not overwrite, the staging directory
beside it, the atomic swap, leftovers of killed builds, and the engine tables a replaced index used.

Everything is written into a fresh directory beside the target and swapped in only when complete,
so Ctrl-C or kill -9 at any moment leaves the previous index exactly as it was.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexing.ann_index import FILES as ANN_FILES
from indexing.bm25_builder import file_names as bm25_file_names
from indexing.bm25_impacts import impact_names
from indexing.index_files import MANIFEST_TMP, METADATA_MAX_BYTES, IndexDir
from indexing.index_store import FILES as STORE_FILES
from indexing.index_store import LEGACY_FILES, METADATA
from indexing.kg_store import KG_FILES
from indexing.leaf_terms import PREFIX as LEAF_TERMS_PREFIX
from utils.atomic import keep_mode, replace_directory
from utils.errors import IndexFormatError, InputError
from utils.interrupts import defer_interrupts
from utils.paths import index_dir_path

if TYPE_CHECKING:
    from indexing.seekdb.uri import StoreURI

    Tables = tuple[StoreURI, str]
    """An engine and a table prefix: the tables of one engine-backed index."""

_TMP_RE = re.compile(r"^\.(?P<name>.+)\.building-(?P<pid>\d+)-")

OWN_FILES = frozenset({*STORE_FILES, *LEGACY_FILES, *KG_FILES, *bm25_file_names(),
                       *bm25_file_names(LEAF_TERMS_PREFIX), *impact_names(), *ANN_FILES})
"""Every file an index build writes (all format versions)."""


def real_output(output: Path) -> Path:
    """The directory a symlinked ``--output`` names: the build updates, locks and swaps that
    directory (replacing the link itself left it stale and took a lock the other name did not see)."""
    output = Path(output)
    if not output.is_symlink():
        return output
    target = Path(os.path.realpath(output))
    if not target.exists():
        raise InputError(f"output {output} is a symbolic link to {target}, which does not exist")
    if not target.is_dir():
        raise InputError(f"output {output} is a symbolic link to {target}, which is not a directory")
    return target


def prepare_output(output: Path) -> None:
    """Refuse an output that is not an index, holds files no build wrote, or cannot be written."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise InputError(f"output {output} exists and is not a directory")
    if output.is_dir() and any(output.iterdir()) and not (output / METADATA).exists():
        raise InputError(f"output {output} is a non-empty directory that is not a TreeRAG index; "
                         "refusing to replace it")
    foreign = _foreign_files(output)
    if foreign:
        # the rebuild replaces the whole directory: a file TreeRAG did not write would be lost
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(f"output {output} holds files TreeRAG did not write ({shown}); move them out "
                         f"or choose another --output: rebuilding replaces the whole directory")
    parent = output.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory {parent}: {exc.strerror}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"output directory {parent} is not writable")


def _foreign_files(output: Path) -> list[str]:
    """Entries of an existing index directory that no TreeRAG build wrote."""
    if not (output / METADATA).is_file():
        return []
    return sorted(e.name for e in output.iterdir() if e.name not in OWN_FILES and not is_delta_file(e.name))


SOURCES_PREFIX = "sources."
"""``sources.<build id>.json``, one per update (indexing/delta_update.py): every live document's file size
and modification time, so the next update can tell an unchanged file without reading it (named in
metadata.json's segments)."""
_DELTA_RE = re.compile(r"^delta[1-9][0-9]*\.(?P<name>.+)$")


def is_delta_file(name: str) -> bool:
    """A delta segment's file (indexing/delta_update.py) or an update's temporary manifest."""
    m = _DELTA_RE.match(name)
    return (m is not None and m.group("name") in OWN_FILES) or name.startswith((MANIFEST_TMP, SOURCES_PREFIX))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_builds(target: Path) -> None:
    """Remove temporary build directories left by builds that were killed."""
    parent = target.parent
    if not parent.is_dir():
        return
    for entry in parent.iterdir():
        m = _TMP_RE.match(entry.name)
        if m and m.group("name") == target.name and not _pid_alive(int(m.group("pid"))):
            shutil.rmtree(entry, ignore_errors=True)


def staging_dir(output: Path) -> Path:
    """A fresh directory beside ``output`` that this process's build writes into (named so that
    ``clean_stale_builds`` recognises it once this process is gone)."""
    return Path(tempfile.mkdtemp(prefix=f".{output.name}.building-{os.getpid()}-", dir=output.resolve().parent))


def swap_in(staged: Path, output: Path) -> list[str]:
    """``staged`` becomes ``output`` atomically, with the old directory's permissions; notes for the person.

    From here on Ctrl-C is held back (utils/interrupts.py): the build is committed at the swap, and
    ``build_index`` reports it done."""
    keep_mode(staged, output)
    defer_interrupts()
    left = replace_directory(staged, output)
    if left:
        return [f"the replaced index could not be removed and stays beside it ({left}); remove it by hand"]
    return []


@dataclass(frozen=True)
class ReplacedTables:
    """The engine tables of the index a build replaces: retired once the new index is in place."""

    current: "Tables | None" = None
    """The tables the index now at the output uses (None: a file index, or none)."""
    left: "list[Tables]" = field(default_factory=list)
    """Tables an earlier build could not drop and this one could not either."""

    @classmethod
    def at(cls, output: Path) -> "ReplacedTables":
        """What the index at ``output`` uses, after one more try at dropping what earlier builds left."""
        meta = _metadata_of(output)
        return cls(current=_engine_tables(meta), left=_drop_retired(meta))

    def retire(self, output: Path, new_prefix: str | None) -> list[str]:
        """Drop the replaced index's tables (not the new index's); tables the engine keeps are recorded
        in the new metadata.json for the next build. Notes for the person."""
        left = list(self.left)
        if self.current is not None and self.current[1] != new_prefix:
            from indexing.seekdb.publish import drop_retired  # noqa: PLC0415

            left += drop_retired([self.current])
        if not left:
            return []
        from indexing.seekdb.publish import mark_retired  # noqa: PLC0415

        mark_retired(output, left)
        return [f"the engine did not let go of {len(left)} replaced table set(s) "
                f"({', '.join(p for _, p in left)}_*); the next build drops them"]


def _metadata_of(output: Path) -> dict[str, Any] | None:
    """The metadata.json of the index now at ``output``, if it reads as a JSON object."""
    try:
        with IndexDir(index_dir_path(output, "--output")) as files:  # bounded, regular file only
            meta = files.read_json(METADATA, METADATA_MAX_BYTES)
    except (OSError, IndexFormatError):
        return None
    return meta if isinstance(meta, dict) else None


def _drop_retired(meta: dict[str, Any] | None) -> "list[Tables]":
    """Drop the engine tables an earlier build could not (a fresh process usually can); those left."""
    if not meta or not meta.get("retired_tables"):
        return []
    from indexing.seekdb.publish import drop_retired, retired_tables  # noqa: PLC0415

    return drop_retired(retired_tables(meta))


def _engine_tables(meta: dict[str, Any] | None) -> "Tables | None":
    if not meta or "store" not in meta:
        return None
    from indexing.seekdb.publish import previous_tables  # noqa: PLC0415

    return previous_tables(meta)


def engine_tables_of(output: Path) -> "Tables | None":
    """The engine tables the index now at ``output`` uses (dropped once it is replaced)."""
    return _engine_tables(_metadata_of(output))
