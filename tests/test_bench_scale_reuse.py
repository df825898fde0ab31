"""bench_scale's measuring of an existing index: its ``--reuse-index`` values, the corpus a reused index
names, and the one-document change made on a hard-linked copy without touching the original."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import load_benchmark


def test_reuse_values_are_checked(tmp_path: Path) -> None:
    b = load_benchmark("bench_scale")
    (tmp_path / "idx").mkdir()
    assert "not an index directory" in b.parse_reuse([f"10={tmp_path / 'idx'}"])
    (tmp_path / "idx" / "metadata.json").write_text(json.dumps({"input": str(tmp_path / "gone")}))
    assert b.parse_reuse([f"10={tmp_path / 'idx'}"]) == {10: tmp_path / "idx"}
    for bad in ("idx", "ten=x", "10="):
        assert "N=DIR" in b.parse_reuse([bad])
    assert "are not there" in b.reused_corpus(tmp_path / "idx")
    (tmp_path / "gone").mkdir()
    (tmp_path / "idx" / "metadata.json").write_text(json.dumps({"input": str(tmp_path / "gone"),
                                                                "build_seconds": 12.5}))
    assert b.reused_corpus(tmp_path / "idx") == (tmp_path / "gone", 12.5)


def test_the_changed_document_of_a_hard_linked_copy_leaves_the_original(tmp_path: Path) -> None:
    b = load_benchmark("bench_scale")
    docs = tmp_path / "docs" / "part-000"
    docs.mkdir(parents=True)
    for i in range(3):
        (docs / f"doc-{i}.md").write_text(f"# Doc {i}\n\nFirst paragraph of {i}.\n\nSecond paragraph of {i}.\n")
    before = {p.name: p.read_bytes() for p in docs.iterdir()}
    subprocess.run(["cp", "-al", str(tmp_path / "docs"), str(tmp_path / "copy")], check=True)
    changed = b.change_one_document(tmp_path / "copy")
    assert changed.name == "doc-1.md"
    assert "added to measure an index update" in changed.read_text()
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == before
    assert os.stat(docs / "doc-0.md").st_ino == os.stat(tmp_path / "copy" / "part-000" / "doc-0.md").st_ino
