"""Reading the files of one index version, and only that version, with bounded memory.

Why every file goes through one opened directory (``os.open`` + ``dir_fd``):
a rebuild swaps a complete new directory in place of the old one. A reader
that opened ``metadata.json``, ``tree.json`` … by path one after another could
take some files from the old version and some from the new. Holding a file
descriptor of the directory pins one version: names are resolved inside that
inode whatever happens to the path meanwhile. When the swap also removes the
old directory before every file was opened, the reader sees a missing file,
notices the path now names another directory, and starts over on the new one.

Why a manifest: ``metadata.json`` names every other file with its size and
sha256 (and the build id). Sizes bound every read — a ``chunks.jsonl`` that is
a 20 GB file or a link to ``/dev/zero`` is refused before a byte is read — and
hashes catch a file changed in place or taken from another build.

Why a *sampled* digest too: hashing every byte of a 10,000-document index
(gigabytes of vectors and text) on each load costs seconds and pages the whole
index into memory, which is what memory-mapping avoids. A load checks each
file's size and ``sample`` (sha256 of the size and 64 blocks of 4 KiB spread
over the file; the whole file when it is at most 1 MiB), which tells two
builds apart and catches truncation, padding and most in-place edits; ``verify``
(``IndexDir(verify=True)``, ``python main.py verify``) checks the full sha256.

Why ``O_NOFOLLOW | O_NONBLOCK`` and a regular-file check: a FIFO would block
``open`` forever, a device or symlink could read anything on the machine. A
build never writes either, so both are refused.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import mmap
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

import numpy as np
from numpy.lib import format as npy_format

from utils.bounded_read import kind_name
from utils.oneline import one_line
from utils.errors import IndexFormatError
from utils import mapped_pages

METADATA = "metadata.json"
CHUNKS = "chunks.jsonl"
CHUNK_OFFSETS = "chunk_offsets.npy"
LEAF_CHUNKS = "leaf_chunks.npy"
EMBEDDINGS = "embeddings.npy"
LEAF_EMBEDDINGS = "leaf_embeddings.npy"
CHUNK_KEYS = "chunk_text_keys.npy"
LEAF_KEYS = "leaf_text_keys.npy"
"""The files of an index beside the node table's (node_table.py) and the postings' (bm25_builder.py);
index_store.py reads them, index_writer.py writes them."""
KEY_BYTES = 16
"""Bytes of a text key: the digest of the text a vector embeds (``index_store.text_key``)."""
METADATA_MAX_BYTES = 256 * 1024 * 1024
"""metadata.json is read before anything declares its size; a real one is far smaller."""
UNDECLARED_MAX_BYTES = 4 * 1024 * 1024 * 1024
"""Bound for a file read without a manifest (a BM25 index saved on its own, in tests)."""


class IndexFileMissing(IndexFormatError):
    """A file of the index is not there (maybe because the directory was just replaced)."""


class IndexChanged(IndexFormatError):
    """A file does not match the manifest (maybe because it was rewritten in place)."""


SAMPLE_BLOCK = 4096
SAMPLE_BLOCKS = 64
SAMPLE_WHOLE_MAX = 1 << 20
"""Files up to this size are sampled whole: their sample digest covers every byte."""


@dataclass(frozen=True)
class FileEntry:
    size: int
    sha256: str
    sample: str


def sample_digest(read_at: Callable[[int, int], bytes], size: int) -> str:
    """sha256 over the size and fixed blocks of the file (every byte when it is small)."""
    h = hashlib.sha256(size.to_bytes(8, "little"))
    if size <= SAMPLE_WHOLE_MAX:
        h.update(read_at(0, size))
    else:
        for k in range(SAMPLE_BLOCKS):
            h.update(read_at(k * (size - SAMPLE_BLOCK) // (SAMPLE_BLOCKS - 1), SAMPLE_BLOCK))
    return h.hexdigest()


def parse_manifest(files: Any, where: str) -> dict[str, FileEntry]:
    if not isinstance(files, dict) or not files:
        raise IndexFormatError(f"{where}: 'files' (the manifest) is missing or empty")
    out: dict[str, FileEntry] = {}
    for name, entry in files.items():
        if (not isinstance(name, str) or "/" in name or name in ("", ".", "..")
                or not isinstance(entry, dict)):
            raise IndexFormatError(f"{where}: manifest entry {name!r} is invalid")
        size, digest, sample = entry.get("size"), entry.get("sha256"), entry.get("sample")
        if (not isinstance(size, int) or isinstance(size, bool) or size < 0
                or not isinstance(digest, str) or len(digest) != 64
                or not isinstance(sample, str) or len(sample) != 64):
            raise IndexFormatError(f"{where}: manifest entry {name!r} needs a size, a sha256 and a sample")
        out[name] = FileEntry(size, digest, sample)
    return out


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number JSON allows")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder (json.loads with a keyword argument would build a new one per call)."""


def loads_strict(data: bytes | str, name: str) -> Any:
    """json.loads that refuses NaN/Infinity and turns deep nesting into a one-line error."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return _STRICT.decode(text)
    except RecursionError:
        raise IndexFormatError(f"{name} is nested too deeply to be an index file") from None
    except UnicodeDecodeError:
        raise IndexFormatError(f"{name} is not UTF-8") from None
    except ValueError as exc:  # JSONDecodeError included
        raise IndexFormatError(f"{name} is corrupt ({exc.__class__.__name__}: {one_line(exc, 160)})") from None


def sha256_file(fh: BinaryIO) -> str:
    fh.seek(0)
    return hashlib.file_digest(fh, "sha256").hexdigest()


class IndexDir:
    """An index directory opened once; every read resolves names inside that one inode.

    ``verify``: check every file's full sha256 instead of its sampled digest.
    """

    def __init__(self, path: Path, verify: bool = False) -> None:
        self.path = Path(path)
        self.verify = verify
        self.manifest: dict[str, FileEntry] | None = None
        self._held: dict[str, int] = {}
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise IndexFileMissing(f"no index at {self.path}") from None
        except NotADirectoryError:
            raise IndexFormatError(f"{self.path} is not an index directory") from None
        except OSError as exc:
            raise IndexFormatError(f"cannot open the index at {self.path}: {exc.strerror}") from None

    def hold_all(self, manifest: dict[str, FileEntry]) -> None:
        """Adopt the manifest and open every file it names at once.

        A rebuild deletes the replaced directory right after the swap; files
        opened before that stay readable, so opening them all in a few
        microseconds (instead of one by one while parsing) leaves a swap almost
        no window to make a load start over.
        """
        self.manifest = manifest
        for name in manifest:
            try:
                self._held[name] = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                           dir_fd=self.fd)
            except OSError:
                pass  # reported with the right wording when the file is read
        if not self.verify:
            self._prefetch_samples()

    def _prefetch_samples(self) -> None:
        """Ask the kernel for every block the sampled digests will read, all at once.

        Why: after the page cache is dropped, the ~1,600 sampled 4 KiB blocks of a large index are
        random reads; read one after another each waits for the disk, requested together the disk
        queue serves them in parallel. An advice only: a file that is not what the manifest says is
        still refused by the reads that follow.
        """
        if not hasattr(os, "posix_fadvise") or self.manifest is None:
            return
        for name, fd in self._held.items():
            entry = self.manifest.get(name)
            if entry is None:
                continue
            size = entry.size
            try:
                if size <= SAMPLE_WHOLE_MAX:
                    os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
                else:
                    for k in range(SAMPLE_BLOCKS):
                        os.posix_fadvise(fd, k * (size - SAMPLE_BLOCK) // (SAMPLE_BLOCKS - 1), SAMPLE_BLOCK,
                                         os.POSIX_FADV_WILLNEED)
            except OSError:
                continue

    def will_need(self, spans: dict[str, int]) -> None:
        """Ask the kernel for the first ``spans[name]`` bytes of each held file (-1: all of it) at once.

        Why: a load reads some files whole (the node table, the leaf -> chunk table, the BM25
        pointers and vocabularies, the ANN's centroids) one after another; after the page cache is
        dropped each would wait for the disk in turn, requested together the disk reads them in
        parallel while the first ones are parsed. An advice only, like ``_prefetch_samples``.
        """
        if not hasattr(os, "posix_fadvise") or self.manifest is None:
            return
        for name, length in spans.items():
            fd, entry = self._held.get(name), self.manifest.get(name)
            if fd is None or entry is None:
                continue
            try:
                os.posix_fadvise(fd, 0, entry.size if length < 0 else min(length, entry.size),
                                 os.POSIX_FADV_WILLNEED)
            except OSError:
                continue

    def close(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "IndexDir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def replaced(self) -> bool:
        """True when the path no longer names the directory this object holds open."""
        try:
            mine = os.fstat(self.fd)
            now = os.stat(self.path)
        except OSError:
            return True
        return mine.st_nlink == 0 or (mine.st_ino, mine.st_dev) != (now.st_ino, now.st_dev)

    # ------------------------------------------------------------------ opening

    def _limit(self, name: str, default_max: int) -> tuple[int, FileEntry | None]:
        if self.manifest is None:
            return default_max, None
        entry = self.manifest.get(name)
        if entry is None:
            raise IndexFormatError(f"{name} is not listed in the manifest of metadata.json")
        return entry.size, entry

    def open(self, name: str, default_max: int = UNDECLARED_MAX_BYTES) -> tuple[BinaryIO, int, FileEntry | None]:
        """Open ``name`` for reading: regular file, no symlink, no larger than declared."""
        limit, entry = self._limit(name, default_max)
        try:
            held = self._held.pop(name, None)
            fd = held if held is not None else os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            raise IndexFileMissing(f"{name} is missing from the index at {self.path}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise IndexFormatError(f"{name} is a symbolic link; index files must be regular files") from None
            raise IndexFormatError(f"cannot open {name}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise IndexFormatError(f"{name} is {kind_name(st.st_mode)}; index files must be regular files")
            if entry is not None and st.st_size != entry.size:
                raise IndexChanged(f"{name} has {st.st_size} bytes but metadata.json declares {entry.size} "
                                   f"(modified after the build, or from another build); rebuild the index")
            if st.st_size > limit:
                raise IndexFormatError(f"{name} is {st.st_size} bytes, more than the {limit} allowed")
            fh = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        return fh, int(st.st_size), entry

    def _check(self, name: str, entry: FileEntry | None, read_at: Callable[[int, int], bytes], size: int,
               full: Callable[[], str]) -> None:
        if entry is None:
            return
        if self.verify:
            ok = full() == entry.sha256
        else:
            ok = sample_digest(read_at, size) == entry.sample
        if not ok:
            raise IndexChanged(f"{name} does not match the sha256 in metadata.json "
                               f"(modified after the build, or from another build); rebuild the index")

    def _check_file(self, name: str, entry: FileEntry | None, fh: BinaryIO, size: int) -> None:
        fd = fh.fileno()
        self._check(name, entry, lambda off, n: os.pread(fd, n, off), size, lambda: sha256_file(fh))

    # ------------------------------------------------------------------ reading

    def read_bytes(self, name: str, default_max: int = UNDECLARED_MAX_BYTES) -> bytes:
        fh, size, entry = self.open(name, default_max)
        with fh:
            data = fh.read(size + 1)  # never more than one byte past what fstat promised
        if len(data) != size:
            raise IndexChanged(f"{name} changed size while being read")
        self._check(name, entry, lambda off, n: data[off:off + n], size, lambda: hashlib.sha256(data).hexdigest())
        return data

    def map_bytes(self, name: str) -> "mmap.mmap | bytes":
        """The file's bytes, memory-mapped (read-only): records are read from it one at a time."""
        fh, size, entry = self.open(name)
        with fh:
            self._check_file(name, entry, fh, size)
            if size == 0:
                return b""
            return mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)

    def read_json(self, name: str, default_max: int = UNDECLARED_MAX_BYTES) -> Any:
        return loads_strict(self.read_bytes(name, default_max), name)

    def read_array(self, name: str, mmap: bool = True) -> np.ndarray:
        """A plain numeric .npy array; memory-mapped from the open file when ``mmap``."""
        fh, size, entry = self.open(name)
        with fh:
            try:
                version = npy_format.read_magic(fh)
                if version == (1, 0):
                    shape, fortran, dtype = npy_format.read_array_header_1_0(fh)
                elif version in ((2, 0), (3, 0)):
                    shape, fortran, dtype = npy_format.read_array_header_2_0(fh)
                else:
                    raise ValueError(f"unsupported .npy version {version}")
            except (ValueError, OSError, EOFError, SyntaxError) as exc:
                raise IndexFormatError(f"{name} is corrupt or not a plain .npy array ({one_line(exc, 160)})") from None
            if dtype.hasobject or dtype.kind not in "biuf":
                raise IndexFormatError(f"{name} holds {dtype} values, not plain numbers (pickled data is refused)")
            offset = fh.tell()
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
                raise IndexFormatError(f"{name} declares an invalid shape {one_line(shape, 80)}")
            count = math.prod(shape)  # Python ints: a crafted shape cannot overflow the size check
            if offset + count * dtype.itemsize != size:
                raise IndexFormatError(f"{name} is truncated or padded: {size} bytes for shape {shape} {dtype}")
            self._check_file(name, entry, fh, size)
            order = "F" if fortran else "C"
            if count == 0:
                return np.zeros(shape, dtype=dtype, order=order)
            if mmap:
                return np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
            fh.seek(offset)
            out = np.empty(count, dtype=dtype)  # read straight into the array: no bytes object, no copy
            view = out.view(np.uint8)
            got = 0
            while got < len(view):
                n = fh.readinto(memoryview(view[got:]))
                if not n:
                    raise IndexChanged(f"{name} changed size while being read")
                got += n
            return out.reshape(shape, order=order)


def release_pages(*arrays: Any) -> None:
    """Unmap the resident pages of memory-mapped arrays from this process (the data stays in the page
    cache; a later read maps it again). Why: a check that reads a whole file, or a query that reads
    scattered rows, leaves every touched page counted in the process's memory until it exits."""
    for a in _flat(arrays):
        m = getattr(a, "_mmap", None)
        if isinstance(a, np.memmap) and isinstance(m, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            try:
                m.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass  # an advice only: the pages then stay mapped


def resident_mb() -> float | None:
    """This process's resident size in MB (mapped file pages included), or None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * mmap.PAGESIZE / (1 << 20)
    except (OSError, ValueError, IndexError):
        return None


def release_over(limit_mb: int, *arrays: Any, directory: Path | None = None,
                 keep: frozenset[str] = frozenset()) -> bool:
    """``release_pages`` once the process's resident size passes ``limit_mb`` (0: always); whether it did.
    With ``directory``, every read-only mapping of a file under it too (``utils.mapped_pages``: the ANN
    lists faiss maps, the records, the postings of the question's terms), except the files in ``keep``
    (real paths: the ANN files while they are small enough to keep, config ``query_ann_kept_mb``).

    Why not every time: a question's scattered rows fault in whole read-around windows, and a window
    kept mapped is one the next question's rows often fall into again, so their faults cost less the
    longer the windows stay (docs/scale.md).
    """
    size = resident_mb() if limit_mb > 0 else None
    if size is not None and size <= limit_mb:
        return False
    release_pages(*arrays)
    if directory is not None:
        mapped_pages.release_mappings(directory, keep)
    return True


def touch_rows(array: Any, rows: np.ndarray) -> None:
    """Read in the pages of the given rows of a memory-mapped 2-D array (its first and last value each:
    a row may straddle two pages), so that a later gather of those rows finds them mapped.

    Why: page faults are the largest part of reading a few thousand scattered vector rows; a thread
    that touches them while another works moves that cost off the question's critical path.
    """
    own = getattr(array, "touch_rows", None)
    if own is not None:  # rows of several segments' files (indexing/segments.PiecewiseRows)
        own(rows)
        return
    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(array, np.memmap) and array.ndim == 2 and len(rows) and array.shape[1]:
        rows = rows[(rows >= 0) & (rows < len(array))]
        will_need_rows(array, rows)
        array[rows, 0]
        array[rows, array.shape[1] - 1]


def will_need_rows(array: Any, rows: np.ndarray) -> None:
    """Request the pages of ``rows`` of a memory-mapped array from the disk together, before they are
    read (``utils.mapped_pages.will_need``): scattered rows then cost one round of parallel reads
    after the page cache is dropped, not one disk wait each. Nothing for an array in memory."""
    rows = np.asarray(rows, dtype=np.int64)
    will_need_spans(array, rows, rows + 1)


def will_need_range(array: Any, start: int, end: int) -> None:
    """As ``will_need_rows`` for the rows [start, end) of a memory-mapped array (one leaf's or
    document's vectors, read whole by a scoped question)."""
    if 0 <= start < end <= len(array):
        will_need_spans(array, np.array([start]), np.array([end]))


def will_need_spans(array: Any, starts: np.ndarray, ends: np.ndarray) -> None:
    """As ``will_need_rows`` for the row ranges [starts, ends) of a memory-mapped array (of a 1-D
    one, element ranges: the postings of a question's terms). The one place rows become addresses."""
    if not isinstance(array, np.memmap) or array.ndim < 1 or not array.size or not len(starts):
        return
    step, base = int(array.strides[0]), array.ctypes.data
    mapped_pages.will_need(np.asarray(starts, dtype=np.int64) * step + base, np.asarray(ends, dtype=np.int64) * step + base)


def advise_random(*maps: Any) -> None:
    """Tell the kernel these mapped files are read at scattered places (``MADV_RANDOM``).

    Why: a page fault in a mapped file normally reads ahead around it (128 KB and more). A question
    reads a few thousand scattered vectors and records; with read-ahead each costs tens of pages
    from disk, so after the page cache is dropped a first question read ~0.5 GB for ~10 MB it used.
    Only for files a query reads scattered: a whole scan wants the read-ahead.
    """
    for a in _flat(maps):
        m = getattr(a, "_mmap", a) if isinstance(a, np.memmap) else a
        if isinstance(m, mmap.mmap) and hasattr(mmap, "MADV_RANDOM"):
            try:
                m.madvise(mmap.MADV_RANDOM)
            except (OSError, ValueError):
                pass  # an advice only


def _flat(arrays: Any) -> list[Any]:
    """Arrays, with those of a segmented index's parts (tuples, lists, ``parts``) listed one by one."""
    out: list[Any] = []
    for a in arrays:
        parts = a if isinstance(a, (tuple, list)) else getattr(a, "parts", None)
        if parts is not None and not isinstance(a, np.ndarray):
            out.extend(_flat(parts))
        else:
            out.append(a)
    return out


def write_manifest_entry(directory: Path, name: str) -> dict[str, Any]:
    """Size, sha256 and sampled digest of a file just written, after forcing it to disk."""
    with open(Path(directory) / name, "rb") as fh:
        fd = fh.fileno()
        os.fsync(fd)
        size = os.fstat(fd).st_size
        digest = sha256_file(fh)
        sample = sample_digest(lambda off, n: os.pread(fd, n, off), size)
    return {"size": size, "sha256": digest, "sample": sample}


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MANIFEST_TMP = ".metadata.json.delta-"
"""Prefix of a manifest being replaced; a leftover after a crash is recognised (and removed) as the
index's own file."""


def replace_manifest(directory: Path, meta: dict[str, Any], *,
                     checkpoint: Callable[[str], None] = lambda step: None,
                     before_rename: Callable[[], None] = lambda: None) -> None:
    """The one way an existing index's metadata.json changes: written beside it, forced to disk, then
    renamed over it, so a reader sees the old manifest or the new one and a crash leaves the old one.
    The file keeps the old one's permissions: a shared index stays readable by whoever could read it.
    ``before_rename`` may raise to abandon the change (the temporary file is removed);
    ``checkpoint`` marks the steps for crash tests."""
    directory = Path(directory)
    target = directory / "metadata.json"
    tmp = directory / f"{MANIFEST_TMP}{os.getpid()}"
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(meta, fh, ensure_ascii=False, indent=2, allow_nan=False)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    checkpoint("manifest written")  # a crash from here on leaves the temporary file, as a kill would
    fsync_directory(directory)
    try:
        before_rename()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.rename(tmp, target)
    checkpoint("manifest renamed")
    fsync_directory(directory)
