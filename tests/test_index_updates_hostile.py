"""Updating an index in place: permissions kept, one updater at a time, leftovers said, store dirs checked."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from indexing.index_store import load_index
from tests.conftest import TEST_PAPER, run_cli
from utils.dir_lock import exclusive
from utils.errors import InputError


def _build(out: Path, src: Path = TEST_PAPER):
    config = Config()
    return build_index(src, out, config, make_embedder("hash", config))


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_an_update_keeps_the_index_directory_permissions(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    _build(out)
    os.chmod(out, 0o755)
    _build(out)  # an update
    assert _mode(out) == 0o755
    os.chmod(out, 0o750)
    _build(out)
    assert _mode(out) == 0o750


def test_a_first_build_follows_the_umask_not_mkdtemp(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        _build(tmp_path / "idx")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "idx") == 0o755


def test_a_replaced_index_that_cannot_be_removed_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import utils.atomic as atomic

    out = tmp_path / "idx"
    _build(out)

    def stubborn_rmtree(path, ignore_errors=False, onerror=None):  # as for a directory another user owns
        if onerror is not None:
            onerror(os.rmdir, str(path), (PermissionError, PermissionError(13, "Permission denied"), None))

    monkeypatch.setattr(atomic.shutil, "rmtree", stubborn_rmtree)
    report = _build(out)
    assert any("could not be removed" in n for n in report.notes)
    assert load_index(out).metadata["counts"]["chunks"] > 0


def test_a_second_updater_refuses_while_the_first_holds_the_index(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    _build(out)
    before = load_index(out).metadata["build_id"]
    with exclusive(out):
        with pytest.raises(InputError, match="another build is updating"):
            _build(out)
        proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock", "--quiet")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "another build is updating" in proc.stderr
    assert load_index(out).metadata["build_id"] == before
    _build(out)  # the lock is released with its holder
    assert load_index(out).metadata["build_id"] != before


def test_concurrent_updaters_never_both_succeed_silently(tmp_path: Path) -> None:
    """Two updaters started together: each either swaps its version in or says it was refused."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    src = tmp_path / "in"
    src.mkdir()
    for i in range(150):
        (src / f"d{i:03d}.md").write_text(f"# Doc {i}\n\n" + "Words of the document. " * 40, encoding="utf-8")
    out = tmp_path / "idx"
    cmd = [sys.executable, str(ROOT / "main.py"), "index", "--input", str(src), "--output", str(out), "--mock",
           "--quiet"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    codes = [p.returncode for p in procs]
    assert all("Traceback" not in err for _, err in results)
    assert 0 in codes
    for code, (_, err) in zip(codes, results):
        if code != 0:
            assert "another build is updating" in err
    assert load_index(out).metadata["counts"]["documents"] == 150


def test_embedded_store_refuses_a_non_empty_directory_that_is_not_a_database(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Mine\n", encoding="utf-8")
    proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx"), "--mock", "--quiet",
                   "--store", f"seekdb://{docs}")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "not a seekdb database" in proc.stderr
    assert sorted(p.name for p in docs.iterdir()) == ["notes.md"]


def test_embedded_store_refuses_a_file_index_directory(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    _build(out)
    proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx2"), "--mock", "--quiet",
                   "--store", f"seekdb://{out}")
    assert proc.returncode != 0 and "not a seekdb database" in proc.stderr
    assert load_index(out).metadata["counts"]["chunks"] > 0


# --------------------------------------------------------------------------- --output as a symlink

def _docs(tmp_path: Path, body: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "a.md").write_text(f"# A\n\n## One\n\n{body}\n", encoding="utf-8")
    return docs


def test_output_given_as_a_symlink_updates_the_linked_index(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    _build(real, _docs(tmp_path, "alpha epochs."))
    link.symlink_to(real)
    old_id = load_index(real).metadata["build_id"]
    r = run_cli("index", "--input", str(_docs(tmp_path, "CHANGED text.")), "--output", str(link), "--mock", "--quiet")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert load_index(real).metadata["build_id"] != old_id
    assert "CHANGED text." in (real / "chunks.jsonl").read_text(encoding="utf-8")
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))
    assert left == ["docs", "link", "real"]  # no renamed link or old index left beside
    assert "could not be removed" not in r.stderr


def test_output_symlink_and_its_target_share_one_lock(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    _build(real)
    link.symlink_to(real)
    with exclusive(real):
        r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(link), "--mock", "--quiet")
    assert r.returncode != 0 and "another build is updating" in r.stderr


def test_output_symlink_to_nothing_is_a_one_line_error(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing")
    r = run_cli("index", "--input", str(TEST_PAPER), "--output", str(link), "--mock", "--quiet")
    assert r.returncode != 0 and r.stderr.startswith("error: output ") and "does not exist" in r.stderr
    assert r.stderr.count("\n") == 1 and link.is_symlink()


# --------------------------------------------------------------------------- Ctrl-C after the commit

_SIGINT_AFTER = """
import os, signal, sys
sys.path.insert(0, {root!r})
import {module} as where
real = where.{name}
def commit_then_ctrl_c(*a, **k):
    out = real(*a, **k)
    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C the moment the new index is in place
    return out
where.{name} = commit_then_ctrl_c
import main
sys.exit(main.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("module,name,rebuild", [("indexing.build_output", "replace_directory", True),
                                                 ("indexing.delta_update", "replace_manifest", False)])
def test_ctrl_c_just_after_the_commit_reports_the_build_done(tmp_path: Path, module: str, name: str,
                                                             rebuild: bool) -> None:
    """A rebuild commits at the directory swap, an update at the manifest's rename: a Ctrl-C right
    after either leaves the new index in place, and the build says it is done (exit 0)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    out = tmp_path / "idx"
    docs = _docs(tmp_path, "alpha epochs.")
    for i in range(8):  # a small change to a larger folder: an update writes a delta, not a rebuild
        (docs / f"c{i}.md").write_text(f"# C{i}\n\nDocument number {i} about routers.\n", encoding="utf-8")
    _build(out, docs)
    old_id = load_index(out).metadata["build_id"]
    (docs / "b.md").write_text("# B\n\nA new document.\n", encoding="utf-8")
    args = ["index", "--input", str(docs), "--output", str(out), "--mock", "--quiet"] + (["--rebuild"] if rebuild else [])
    script = _SIGINT_AFTER.format(root=str(ROOT), module=module, name=name)
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    assert "interrupted" not in proc.stderr
    assert "note: Ctrl-C came after the new index was in place: the build is complete" in proc.stderr
    index = load_index(out)
    assert index.metadata["build_id"] != old_id and any(d["path"] == "b.md" for d in index.metadata["documents"])
