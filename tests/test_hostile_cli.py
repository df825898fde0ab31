"""Hostile values reaching the CLI from outside: an LLM reply, document headings, settings, log paths.

Each ends in a usable answer or one ``error:`` line, never a traceback, a hang or raw escape
sequences on the terminal.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, TEST_PAPER, run_cli
from tests.stub_servers import StubResponse, StubServer, openai_chat_body


def test_llm_reply_with_a_lone_surrogate_is_answered_and_logged(tmp_path: Path, paper_index_dir: Path) -> None:
    env = {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": "sk-test"}
    with StubServer(default=StubResponse(200, openai_chat_body("Fifty epochs \ud800 [1]"))) as srv:
        env["OPENAI_BASE_URL"] = srv.url + "/v1"
        for extra in ((), ("--json",)):
            q = run_cli("query", "--index", str(paper_index_dir), "--llm", "openai:gpt-4o-mini", "--locator",
                        "keyword", "-q", "How many epochs?", *extra, env=env)
            assert q.returncode == 0, q.stderr
            assert "Traceback" not in q.stderr and "Fifty epochs \ufffd" in (json.loads(q.stdout)["answer"]
                                                                             if extra else q.stdout)
        again = run_cli("query", "--index", str(paper_index_dir), "--llm", "openai:gpt-4o-mini", "--locator",
                        "keyword", "-q", "How many epochs?", "--json", env=env)
        assert json.loads(again.stdout)["answer"].startswith("Fifty epochs \ufffd")  # cached, then served
    h = run_cli("history", env=env)
    assert h.returncode == 0 and h.stdout.count("How many epochs?") == 3


def test_graph_output_carries_no_terminal_escapes(tmp_path: Path) -> None:
    body = " ".join(f"AlphaNet trains BetaSet with GammaLoss in round {i}." for i in range(80))
    doc = tmp_path / "esc.md"
    doc.write_text(f"# T\x1b]0;PWNED\x07itle\n\n## Sec\x1b[31mRED\x1b[0m\n\n{body}\n", encoding="utf-8")
    out = tmp_path / "idx"
    r = run_cli("index", "--input", str(doc), "--output", str(out), "--mock", "--quiet", "--kg", "rules",
                "--kg-min-leaf-chars", "100")
    assert r.returncode == 0, r.stderr
    listing = run_cli("graph", "--index", str(out))
    assert listing.returncode == 0 and "SecRED" in listing.stdout and "\x1b" not in listing.stdout
    leaf = listing.stdout.splitlines()[1].split()[0]
    for extra in ((), ("--json",)):
        g = run_cli("graph", "--index", str(out), "--leaf", leaf, *extra)
        assert g.returncode == 0 and "\x1b" not in g.stdout and "\x07" not in g.stdout


def test_huge_hash_dim_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "treerag.toml").write_text("hash_dim = 1099511627776\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "index", "--input", str(TEST_PAPER), "--output",
                           str(tmp_path / "idx"), "--mock", "--quiet"], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert proc.stderr == ("error: config file treerag.toml: setting hash_dim must be in [2, 65536], "
                           "got 1099511627776\n")


def test_history_and_show_refuse_a_fifo_log(tmp_path: Path) -> None:
    """The old code opened the FIFO and waited for a writer: run in a child with a deadline."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    for args in (["history", "--log", str(fifo)], ["show", "abcdef12", "--log", str(fifo)]):
        try:
            proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                                  timeout=60, cwd=str(ROOT))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{args[0]} --log FIFO hung") from None
        assert proc.returncode != 0
        assert proc.stderr == f"error: run log {fifo} is a FIFO, not a regular file\n"


def test_the_evaluation_tools_refuse_bad_input_in_one_line(tmp_path: Path) -> None:
    """An evaluation tool given a missing set or an unknown arm says so in one line, no traceback."""
    for module, args in (("evaluation.tools.answer_e2e", ["--data", str(tmp_path / "none")]),
                         ("evaluation.learn_ranker", ["--data", str(tmp_path / "none")]),
                         ("evaluation.tools.answer_e2e", ["--data", str(tmp_path), "--flat", "flat-nope"])):
        r = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2, (module, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 5, r.stderr
        assert "error:" in r.stderr.strip().splitlines()[-1]
