"""Hostile input documents: files swapped after the walk, oversized files, zip bombs, deep markup.

Every case ends in a one-line reason (a folder build skips the file with a warning naming the
limit), never a traceback, a hang or a file read from outside the input folder.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from config import Config
from tests.conftest import ROOT
from tree_builder.loader import load_input
from tree_builder.readers.limits import ReadLimits
from utils.errors import InputError


def _folder(tmp_path: Path, n: int = 3) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    for i in range(n):
        (src / f"d{i}.md").write_text(f"# Doc {i}\n\nSome text number {i}.\n", encoding="utf-8")
    (src / "zz.md").write_text("# Last\n\nThe last document.\n", encoding="utf-8")
    return src


_SWAP_SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
import tree_builder.loader as loader
real = loader.walk_folder
def walk_then_swap(folder, follow_links=False):
    out = real(folder, follow_links)
    target = os.path.join(folder, "zz.md")
    os.unlink(target)
    {swap}
    return out
loader.walk_folder = walk_then_swap
loaded = loader.load_input(__import__("pathlib").Path({src!r}))
print("DOCS", [d.path for d in loaded.documents])
print("TEXT", "root:x" in "".join(d.text for d in loaded.documents))
print("WARN", loaded.warnings)
"""


def _run_swap(src: Path, swap: str) -> subprocess.CompletedProcess:
    code = _SWAP_SCRIPT.format(root=str(ROOT), src=str(src), swap=swap)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_file_swapped_for_a_fifo_after_the_walk_is_skipped_not_waited_on(tmp_path: Path) -> None:
    src = _folder(tmp_path)
    try:
        r = _run_swap(src, "os.mkfifo(target)")
    except subprocess.TimeoutExpired:
        pytest.fail("opening a FIFO that replaced a listed file blocked the build")
    assert r.returncode == 0, r.stderr
    assert "'zz.md'" not in r.stdout.split("DOCS", 1)[1].splitlines()[0]
    assert "zz.md: is a FIFO" in r.stdout


def test_file_swapped_for_a_symlink_out_of_the_input_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nroot:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    src = _folder(tmp_path)
    r = _run_swap(src, f"os.symlink({str(secret)!r}, target)")
    assert r.returncode == 0, r.stderr
    assert "TEXT False" in r.stdout
    assert "zz.md: now leads out of the input folder" in r.stdout


def test_symlink_inside_the_input_is_still_read(tmp_path: Path) -> None:
    src = _folder(tmp_path, 1)
    os.symlink("d0.md", src / "link.md")
    loaded = load_input(src)
    assert [d.path for d in loaded.documents] == ["d0.md", "zz.md"]  # the link is the same file as d0.md


def test_file_over_the_size_limit_is_skipped_with_a_warning_naming_the_setting(tmp_path: Path) -> None:
    src = _folder(tmp_path, 1)
    (src / "huge.txt").write_text("word " * 2000, encoding="utf-8")
    limits = ReadLimits.from_config(Config(max_input_bytes=4096))
    loaded = load_input(src, limits=limits)
    assert [d.path for d in loaded.documents] == ["d0.md", "zz.md"]
    assert any(w.startswith("skipped huge.txt:") and "max_input_bytes" in w for w in loaded.warnings)


def test_sparse_file_far_over_the_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as fh:
        fh.truncate(1 << 30)  # sparse: costs no disk, and must cost no memory
    with pytest.raises(InputError, match="max_input_bytes"):
        load_input(huge)


def test_fifo_given_directly_is_a_one_line_error(tmp_path: Path) -> None:
    from tree_builder.readers import read_document

    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        read_document(fifo, "pipe.md")


def _docx_bomb(path: Path, xml_bytes: int) -> None:
    """A zip named .docx whose document.xml unpacks to ``xml_bytes`` (mostly one repeated byte)."""
    head = (b'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
            b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')
    tail = b"</w:t></w:r></w:p></w:body></w:document>"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                    b'package/2006/content-types"/>')
        zf.writestr("word/document.xml", head + b"a" * (xml_bytes - len(head) - len(tail)) + tail)


def test_docx_zip_bomb_is_refused_before_unpacking(tmp_path: Path) -> None:
    src = _folder(tmp_path, 1)
    _docx_bomb(src / "bomb.docx", 3 * 1024 * 1024)
    assert (src / "bomb.docx").stat().st_size < 100_000
    limits = ReadLimits.from_config(Config(max_unpacked_bytes=1024 * 1024))
    loaded = load_input(src, limits=limits)
    assert [d.path for d in loaded.documents] == ["d0.md", "zz.md"]
    assert any(w.startswith("skipped bomb.docx:") and "max_unpacked_bytes" in w for w in loaded.warnings)


def test_docx_within_the_limit_is_still_read(tmp_path: Path) -> None:
    from tests.doc_factory import render_docx, source_from_markdown

    render_docx(source_from_markdown("# Title\n\n## Part\n\nBody text here.\n"), tmp_path / "ok.docx")
    loaded = load_input(tmp_path / "ok.docx")
    assert "Body text here." in loaded.documents[0].text


def test_deeply_nested_html_is_skipped_not_a_recursion_error(tmp_path: Path) -> None:
    src = _folder(tmp_path, 1)
    (src / "deep.html").write_text("<html><body>" + "<div>" * 1000 + "deep" + "</div>" * 1000 + "</body></html>",
                                   encoding="utf-8")
    loaded = load_input(src)
    assert [d.path for d in loaded.documents] == ["d0.md", "zz.md"]
    assert any(w.startswith("skipped deep.html:") and "max_html_depth" in w for w in loaded.warnings)


def test_html_nesting_within_the_limit_is_read(tmp_path: Path) -> None:
    page = tmp_path / "ok.html"
    page.write_text("<html><body><h1>T</h1>" + "<div>" * 200 + "<p>inner text</p>" + "</div>" * 200
                    + "</body></html>", encoding="utf-8")
    assert "inner text" in load_input(page).documents[0].text


def test_html_with_too_many_headings_is_capped(tmp_path: Path) -> None:
    src = _folder(tmp_path, 1)
    (src / "many.html").write_text("<html><body>" + "".join(f"<h2>H{i}</h2><p>x</p>" for i in range(50))
                                   + "</body></html>", encoding="utf-8")
    loaded = load_input(src, limits=ReadLimits.from_config(Config(max_headings=20)))
    assert any(w.startswith("skipped many.html:") and "max_headings" in w for w in loaded.warnings)


def test_html_with_too_many_elements_is_refused_before_parsing(tmp_path: Path) -> None:
    page = tmp_path / "big.html"
    page.write_text("<html><body>" + "<p>x</p>" * 500 + "</body></html>", encoding="utf-8")
    with pytest.raises(InputError, match="max_html_elements"):
        load_input(page, limits=ReadLimits.from_config(Config(max_html_elements=100)))


# --------------------------------------------------------------------------- settings files

def test_ranker_weights_pointing_at_dev_zero_is_a_one_line_error(tmp_path: Path) -> None:
    from retrieval.learned_ranker import load_ranker

    with pytest.raises(InputError, match="ranker weights /dev/zero: is a device"):
        load_ranker("tree", "/dev/zero")


def test_ranker_weights_fifo_is_an_error_not_a_hang(tmp_path: Path) -> None:
    from retrieval.learned_ranker import load_ranker

    fifo = tmp_path / "w.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        load_ranker("tree", fifo)


def test_oversized_ranker_weights_are_refused(tmp_path: Path) -> None:
    from retrieval.learned_ranker import load_ranker

    big = tmp_path / "w.json"
    big.write_text('{"tree": {"x": 1}, "pad": "' + "a" * (2 * 1024 * 1024) + '"}', encoding="utf-8")
    with pytest.raises(InputError, match="limit"):
        load_ranker("tree", big)


def test_config_file_that_is_a_fifo_or_device_is_an_error(tmp_path: Path) -> None:
    from config import load_config_file

    fifo = tmp_path / "treerag.toml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        load_config_file(fifo, {})
    with pytest.raises(InputError, match="is a device"):
        load_config_file(Path("/dev/zero"), {})


def test_deeply_nested_toml_is_a_one_line_error(tmp_path: Path) -> None:
    from config import load_config_file

    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="config file"):
        load_config_file(deep, {})


@pytest.mark.parametrize("text", ["chunk_size = 99999999999999999999999999999999999999999",
                                  "llm_query_budget_s = 1" + "0" * 400,
                                  "chunk_size = " + "9" * 5000])
def test_huge_numbers_in_a_config_file_are_one_line_errors(tmp_path: Path, text: str) -> None:
    from config import load_config_file

    f = tmp_path / "c.toml"
    f.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_config_file(f, {})
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_huge_history_limit_is_a_one_line_error(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    r = run_cli("history", "--limit", "99999999999999999999", "--log", str(tmp_path / "log.db"))
    assert r.returncode != 0 and "Traceback" not in r.stderr and r.stderr.startswith("error: --limit")


def test_huge_llm_timeout_is_a_one_line_error() -> None:
    from config import parse_seconds

    with pytest.raises(InputError):
        parse_seconds(10 ** 400, "LLM timeout")
