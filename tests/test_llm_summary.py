"""`index --summaries llm`: bottom-up, parallel, short sections free, failures fall back."""
from __future__ import annotations

import re
import threading
from pathlib import Path

from config import Config
from tree_builder.llm_summary import LLMSummarizer, summarize_tree_parallel
from tree_builder.loader import load_documents
from tree_builder.summary import ExtractiveSummarizer
from tree_builder.tree import build_tree
from utils.errors import BackendError
from utils.llm.mock import MockLLM
from utils.llm.types import UsageMeter

LONG = " ".join(f"Sentence {i} explains the router's venue choice in regime {i}." for i in range(40))


def _doc(tmp_path: Path) -> Path:
    p = tmp_path / "doc.md"
    p.write_text(f"# 1 Intro\n\nShort intro text here.\n\n# 2 Method\n\n## 2.1 Router\n\n{LONG}\n\n"
                 f"## 2.2 Encoder\n\n{LONG.replace('router', 'encoder')}\n", encoding="utf-8")
    return p


def _tree(tmp_path: Path):
    docs, _ = load_documents(_doc(tmp_path))
    return build_tree(docs, Config(), folder_mode=False)


def test_bottom_up_parallel_with_fallback(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    seen_parent_prompts: list[str] = []
    lock = threading.Lock()

    def reply(req):
        if "子章节概括" in req.prompt:
            with lock:
                seen_parent_prompts.append(req.prompt)
            return "PARENT SUMMARY"
        if "2.2 Encoder" in req.prompt:
            raise BackendError("openai: server error 500 after 5 attempts")
        return "LEAF SUMMARY of " + re.search(r"章节路径: (.*)", req.prompt).group(1)

    llm = MockLLM(reply)
    usage = UsageMeter()
    summ = LLMSummarizer(llm, Config(), usage)
    summarize_tree_parallel(root, summ, workers=4)
    nodes = {n.heading: n for n in root.iter_preorder()}
    assert nodes["1 Intro"].summary == "Short intro text here."  # short: own text, no call
    assert nodes["2.1 Router"].summary == "LEAF SUMMARY of 2 Method > 2.1 Router"
    extractive = ExtractiveSummarizer.of(Config().tuning.summary).summarize_leaf(nodes["2.2 Encoder"])
    assert nodes["2.2 Encoder"].summary == extractive  # failed call -> extractive for that node
    assert nodes["2 Method"].summary == "PARENT SUMMARY"
    # the parent was asked after its children were done, with their summaries
    assert "LEAF SUMMARY of 2 Method > 2.1 Router" in seen_parent_prompts[0]
    st = summ.stats
    assert (st.llm_calls, st.kept_own_text, st.failed) == (2, 1, 1)
    assert not any("1 Intro" in r.prompt for r in llm.requests)


def test_cli_requires_an_llm(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    proc = run_cli("index", "--input", str(_doc(tmp_path)), "--output", str(tmp_path / "idx"), "--mock",
                   "--summaries", "llm")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "needs an LLM" in proc.stderr
