"""Folder input: every format by type, the summary line, and the walk policy
(symlinks, special files, unreadable files, undecodable names)."""
from __future__ import annotations

import json
import os
import pathlib
from pathlib import Path

import pytest

from tests.conftest import TEST_PAPER, run_cli
from tree_builder.loader import load_input
from tree_builder.loader import load_documents

import importlib.util

needs_fpdf = pytest.mark.skipif(importlib.util.find_spec("fpdf") is None, reason="fpdf2 missing")


def _mixed_folder(root: Path) -> Path:
    from tests.doc_factory import render_docx, render_html, render_pdf, source_from_markdown

    src = source_from_markdown(TEST_PAPER.read_text(encoding="utf-8"), "test_paper.md")
    root.mkdir(parents=True)
    render_pdf(src, root / "report.pdf", outline=False)
    render_docx(src, root / "guide.docx")
    render_html(src, root / "page.html")
    (root / "notes.txt").write_text("Notes\n\n1 First\n\nSome notes about the first topic in detail.\n",
                                    encoding="utf-8")
    (root / "readme.md").write_text("# Readme\n\nRead me first.\n", encoding="utf-8")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "data.xlsx").write_bytes(b"PK\x03\x04")
    return root


@needs_fpdf
def test_folder_indexes_every_format_and_names_skipped_files(tmp_path: Path) -> None:
    src = _mixed_folder(tmp_path / "docs")
    proc = run_cli("index", "--input", str(src), "--output", str(tmp_path / "idx"), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[0]
    assert line.startswith("indexed 5 document(s) (1 md, 1 txt, 1 pdf, 1 docx, 1 html): ")
    assert line.endswith("; skipped 2: data.xlsx (unsupported), logo.png (image)")
    meta = json.loads((tmp_path / "idx" / "metadata.json").read_text(encoding="utf-8"))
    assert {d["path"]: d["kind"] for d in meta["documents"]} == {
        "guide.docx": "docx", "notes.txt": "txt", "page.html": "html", "readme.md": "md", "report.pdf": "pdf"}
    tree = run_cli("tree", "--input", str(src))
    assert tree.returncode == 0 and "3.2.1 Encoder Design" in tree.stdout


def test_one_bad_file_in_a_folder_is_skipped_with_a_warning(tmp_path: Path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "good.md").write_text("# Good\n\nFine text.\n", encoding="utf-8")
    (src / "scan.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    loaded = load_input(src)
    assert [d.path for d in loaded.documents] == ["good.md"]
    assert [s.rel for s in loaded.skipped] == ["scan.pdf"]
    assert loaded.warnings and "scan.pdf" in loaded.warnings[0]


# --------------------------------------------------------------------------- walk policy

def _two_folders(tmp_path: Path) -> tuple[Path, Path]:
    src, outside = tmp_path / "docs", tmp_path / "outside"
    src.mkdir()
    (outside / "sub").mkdir(parents=True)
    (src / "a.md").write_text("# A\n\nInside text.\n", encoding="utf-8")
    (outside / "secret.md").write_text("# Secret\n\nOutside text.\n", encoding="utf-8")
    (outside / "sub" / "deep.md").write_text("# Deep\n\nOutside folder text.\n", encoding="utf-8")
    return src, outside


def test_symlinks_leaving_the_folder_are_not_followed_by_default(tmp_path: Path) -> None:
    src, outside = _two_folders(tmp_path)
    os.symlink(outside / "secret.md", src / "link.md")
    os.symlink(outside / "sub", src / "linkdir")
    docs, warnings = load_documents(src)
    assert [d.path for d in docs] == ["a.md"]
    assert any("link.md" in w and "symlink" in w for w in warnings)
    assert any("linkdir" in w and "symlink" in w for w in warnings)
    docs, _ = load_documents(src, follow_links=True)
    assert [d.path for d in docs] == ["a.md", "link.md", "linkdir/deep.md"]
    proc = run_cli("index", "--input", str(src), "--output", str(tmp_path / "idx"), "--mock", "--quiet",
                   "--follow-links")
    assert proc.returncode == 0 and proc.stdout.startswith("indexed 3 document(s)"), proc.stderr


def test_symlinks_inside_the_folder_are_read_once_and_loops_end(tmp_path: Path) -> None:
    src, _ = _two_folders(tmp_path)
    (src / "real").mkdir()
    (src / "real" / "b.md").write_text("# B\n\nText b.\n", encoding="utf-8")
    os.symlink(src / "real", src / "zlink")       # same folder twice
    os.symlink(src, src / "real" / "loop")        # a loop back to the top
    os.symlink(src / "a.md", src / "same.md")     # same file twice
    loaded = load_input(src)
    assert [d.path for d in loaded.documents] == ["a.md", "real/b.md"]
    reasons = {s.rel: s.reason for s in loaded.skipped}
    assert reasons["same.md"] == "same file as a.md"
    assert reasons["zlink"] == "same folder as real" and reasons["real/loop"] == "same folder as ."


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_in_a_folder_is_skipped_not_read(tmp_path: Path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    os.mkfifo(src / "pipe.md")
    proc = run_cli("index", "--input", str(src), "--output", str(tmp_path / "idx"), "--mock", "--quiet",
                   timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "pipe.md" in proc.stderr and "special file" in proc.stderr
    single = run_cli("index", "--input", str(src / "pipe.md"), "--output", str(tmp_path / "idx2"), "--mock",
                     timeout=300)
    assert single.returncode != 0 and "Traceback" not in single.stderr and "neither a file" in single.stderr


def test_unreadable_file_is_skipped_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    (src / "locked.md").write_text("# L\n\nLocked.\n", encoding="utf-8")
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):  # as chmod 000 would for a non-root user
        if os.fspath(path).endswith("locked.md"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    docs, warnings = load_documents(src)
    assert [d.path for d in docs] == ["a.md"]
    assert warnings == ["skipped locked.md: cannot read file (Permission denied)"]


def test_undecodable_file_name_does_not_crash_the_build(tmp_path: Path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    bad = os.path.join(os.fsencode(src), b"caf\xe9.md")
    fd = os.open(bad, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, "# Café\n\nMenu text about coffee.\n".encode("utf-8"))
    os.close(fd)
    (src / "b.md").write_text("# B\n\nOther text.\n", encoding="utf-8")
    out = tmp_path / "idx"
    proc = run_cli("index", "--input", str(src), "--output", str(out), "--mock", "--quiet")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    assert [d["path"] for d in meta["documents"]] == ["b.md", "caf\\xe9.md"]
    q = run_cli("query", "--index", str(out), "--mock", "--no-log", "-q", "coffee menu")
    assert q.returncode == 0 and "caf\\xe9.md" in q.stdout, q.stderr
