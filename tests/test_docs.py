"""The documentation a newcomer reads: a short README whose first commands stay exact, links that
resolve (files and #anchors), and user documentation free of measurement-log residue."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

RUN_MAIN_JOB = ('python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt && '
                'python main.py index --input test_data/test_paper.md --output index/ && '
                'python main.py query --index index/ --query "Why does AdaRouter outperform the baseline?"')
RUN_TESTS = ("python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements-dev.txt && "
             "python -m pytest -q")

OPTIONAL_DOCS = {"docs/serve.md", "docs/graph.md", "docs/models.md", "docs/scale.md"}
"""Linked from the README's documentation list; written with their features, so a branch without
those features may lack them."""

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def _user_docs() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md")),
            *sorted((ROOT / "tools").glob("*/*.md"))]


def _prose(path: Path) -> str:
    """The file without its fenced code blocks (a link or heading inside one is not one)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose(path), re.M):
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_opens_with_the_two_commands_byte_for_byte() -> None:
    """CI and users copy these two lines: they are the first two code blocks, exactly."""
    blocks = re.findall(r"^```bash\n(.*?)\n```", README.read_text(encoding="utf-8"), re.M | re.S)
    assert blocks[:2] == [RUN_MAIN_JOB, RUN_TESTS]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install --quiet -r requirements-dev.txt" in ci and "python -m pytest -q" in ci


@pytest.mark.parametrize("path", _user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            if rel in OPTIONAL_DOCS:
                continue
            broken.append(f"{target} (no file {rel})")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {rel})")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_links_every_document_in_docs() -> None:
    readme = README.read_text(encoding="utf-8")
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name})" in readme, f"README's documentation list misses docs/{doc.name}"


RESIDUE = {
    "a date": re.compile(r"\b20\d\d-[01]\d\b"),
    "a load average": re.compile(r"load average", re.I),
    "an issue number": re.compile(r"\bissue\s*#\s*\d", re.I),
    "a seed file number": re.compile(r"\bseed\s+0\d\d", re.I),
}


@pytest.mark.parametrize("path", _user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_user_docs_hold_no_measurement_log_residue(path: Path) -> None:
    """Documentation says what is true of the code, not when or on which busy afternoon it was measured."""
    text = path.read_text(encoding="utf-8")
    found = [f"{what}: {m.group(0)!r}" for what, rx in RESIDUE.items() for m in rx.finditer(text)]
    assert not found, f"{path.relative_to(ROOT)}: {found}"


@pytest.mark.parametrize("path", _user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_file_the_docs_name_exists(path: Path) -> None:
    """A module renamed or removed must take its mentions in the documentation with it."""
    named = set(re.findall(r"`((?:[a-z_]+/)+[A-Za-z_]+\.(?:py|json|txt|md|toml))`", path.read_text(encoding="utf-8")))
    packages = [ROOT, *(d for d in ROOT.iterdir() if (d / "__init__.py").is_file())]  # or package-relative
    missing = sorted(f for f in named if not any((base / f).exists() for base in packages))
    assert not missing, f"{path.relative_to(ROOT)} names files that do not exist: {missing}"
