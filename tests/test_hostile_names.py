"""File and index names that print badly: undecodable bytes, newlines, two names that print the same."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from config import Config
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from tests.conftest import ROOT, TEST_PAPER
from tree_builder.loader import load_input


def _write(folder: Path, raw_name: bytes, text: str) -> None:
    with open(os.path.join(os.fsencode(folder), raw_name), "w", encoding="utf-8") as fh:
        fh.write(text)


def test_two_names_that_print_the_same_stay_apart(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _write(src, b"caf\xe9.md", "# Cafe one\n\nThe first cafe document.\n")
    _write(src, b"caf\\xe9.md", "# Cafe two\n\nThe second cafe document.\n")
    loaded = load_input(src)
    assert len(loaded.documents) == 1
    assert any("prints the same" in w and "rename one" in w for w in loaded.warnings)
    config = Config()
    report = build_index(src, tmp_path / "idx", config, make_embedder("hash", config))
    assert report.documents == 1


def test_two_names_with_equal_text_do_not_share_a_citation(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _write(src, b"caf\xe9.md", "# Same\n\nSame text.\n")
    _write(src, b"caf\\xe9.md", "# Same\n\nSame text.\n")
    paths = [d.path for d in load_input(src).documents]
    assert len(paths) == len(set(paths)) == 1


def test_a_newline_in_a_file_name_stays_on_one_citation_line(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    _write(src, b"a\nb.md", "# Encoder\n\nThe encoder design uses attention layers.\n")
    docs = load_input(src).documents
    assert [d.path for d in docs] == ["a\\x0ab.md"]
    config = Config()
    build_index(src, tmp_path / "idx", config, make_embedder("hash", config))
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "query", "--index", str(tmp_path / "idx"), "--mock",
                           "--no-log", "-q", "encoder design"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cited = [ln for ln in proc.stdout.splitlines() if ":L" in ln and "b.md" in ln]
    assert cited and all("a\\x0ab.md:L" in ln for ln in cited)


def test_json_output_is_valid_utf8_with_an_undecodable_index_path(tmp_path: Path) -> None:
    config = Config()
    idx = os.path.join(os.fsencode(tmp_path), b"idx\xff")
    build_index(TEST_PAPER, Path(os.fsdecode(idx)), config, make_embedder("hash", config))
    proc = subprocess.run([sys.executable.encode(), os.fsencode(ROOT / "main.py"), b"query", b"--index", idx,
                           b"--mock", b"--no-log", b"--json", b"-q", b"encoder"], capture_output=True, timeout=120,
                          env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": ""})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode("utf-8")  # strict: not one raw 0xFF byte
    assert json.loads(text)["index"]["path"].endswith("idx\\xff")
