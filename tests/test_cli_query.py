"""`query`, `interactive`, `history`, `show` as a user runs them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture()
def log_env(tmp_path: Path) -> dict[str, str]:
    return {"TREERAG_LOG": str(tmp_path / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "cache")}


def test_query_prints_the_spec_layout(paper_index_dir: Path, log_env) -> None:
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", "What is AdaRouter's accuracy on EUR/USD?",
                   env=log_env, fresh_process=True)  # smoke test: a new interpreter, as a user runs it
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "=" * 60 and out[1].startswith("Query: ") and out[2] == "=" * 60
    assert ">>> Step 1: Node Locating" in out and ">>> Step 2: Hybrid Retrieval + Rerank" in out
    assert ">>> Step 3: Answer" in out and out[-1] == "=" * 60
    assert any(re.fullmatch(r"Located \d+ leaf nodes:", l) for l in out)
    assert any(re.fullmatch(r"  \[\d{4}\] .+", l) for l in out)
    assert any(re.fullmatch(r'    sub_query: ".+"', l) for l in out)
    assert any(re.fullmatch(r"Retrieved \d+ chunks \(from \d+ nodes\):", l) for l in out)
    assert any(re.fullmatch(r"  #1 \[\d{4}\] .+  \(test_paper\.md:L\d+(-L\d+)?\)", l) for l in out)
    assert any(re.fullmatch(r"  ordered by section .+, the last score on each line", l) for l in out)
    scores = [l for l in out if l.startswith("     dense=")]
    assert scores and all(re.fullmatch(r"     dense=-?\d+\.\d\d  bm25=\d+\.\d\d  fused=\d+\.\d\d  section=-?\d+\.\d\d", l)
                          for l in scores)
    # between step 2 and step 3, the context step 3 read, each passage numbered
    heads = [i for i, l in enumerate(out) if l.startswith(">>> ")]
    assert [out[i].split(":")[0] for i in heads] == [">>> Step 1", ">>> Step 2", ">>> Context", ">>> Step 3"]
    ctx_at = heads[2]
    m = re.fullmatch(r">>> Context: (\d+) passages?, (\d+) of 6000 characters \(from (\d+) hits\)", out[ctx_at])
    assert m and 0 < int(m.group(2)) <= 6000, out[ctx_at]
    listed = out[ctx_at + 1:ctx_at + 1 + int(m.group(1))]
    assert all(re.fullmatch(r'  \[\d+\] .+  \(test_paper\.md:L\d+(-L\d+)?\)  ".{1,80}"', l) for l in listed), listed
    shown = [int(re.match(r"  \[(\d+)\]", l).group(1)) for l in listed]
    assert shown == list(range(1, len(listed) + 1))
    # the answer's [N] are the context's passage numbers
    step3 = out[out.index(">>> Step 3: Answer") + 1:]
    assert step3[0].endswith("[N] is context passage N):")
    nums = {int(n) for l in step3 for n in re.findall(r"^\[(\d+)\]", l)}
    assert nums and nums <= set(shown)
    assert "no LLM configured" in proc.stderr


def test_query_json_is_only_json(paper_index_dir: Path, log_env, tmp_path: Path) -> None:
    cfg = tmp_path / "rrf.toml"
    cfg.write_text('fusion = "rrf"\n')  # a ranking parameter from the config file, by its flat name
    proc = run_cli("--config", str(cfg), "query", "--index", str(paper_index_dir), "--query", "How many epochs?",
                   "--json", "--top-k", "3", env=log_env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["query"] == "How many epochs?"
    assert len(data["step2_retrieved"]) <= 3 and data["config"]["fusion"] == "rrf"
    for key in ("step1_thinking", "step1_nodes", "step2_retrieved", "context", "answer", "timing_ms", "providers",
                "fallbacks", "usage"):
        assert key in data
    ctx = data["context"]
    assert ctx["passages"] and ctx["used"] <= ctx["budget"] == data["config"]["context_budget_chars"]
    assert all(p["citation"].startswith("test_paper.md:L") for p in ctx["passages"])


def test_mock_query_uses_keyword_locator(paper_index_dir: Path, log_env) -> None:
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", "training procedure epochs", "--mock",
                   "--json", env=log_env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["step1_locator"] == "keyword" and data["providers"]["llm"]["provider"] == "mock"


@pytest.mark.parametrize("args, needle", [
    (["--index", "/nonexistent/idx", "--query", "x"], "no index at"),
    (["--query", "   "], "empty query"),
    (["--query", "x", "--embedder", "onnx"], "rebuild the index"),
    (["--query", "x", "--llm", "anthropic"], "ANTHROPIC_API_KEY"),
])
def test_query_errors_are_one_line(paper_index_dir: Path, log_env, args, needle) -> None:
    if "--index" not in args:
        args = ["--index", str(paper_index_dir), *args]
    proc = run_cli("query", *args, env=log_env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr


def test_broken_index_is_one_line(paper_index_dir: Path, tmp_path: Path, log_env) -> None:
    import shutil

    d = tmp_path / "idx"
    shutil.copytree(paper_index_dir, d)
    (d / "chunks.jsonl").write_text("garbage\n")
    proc = run_cli("query", "--index", str(d), "--query", "x", env=log_env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "chunks.jsonl" in proc.stderr


def test_interactive_session(paper_index_dir: Path, log_env) -> None:
    script = ":help\nWhat is AdaRouter's accuracy on EUR/USD?\n:json\nHow many epochs?\n:frobnicate\nthe of\n"
    proc = run_cli("interactive", "--index", str(paper_index_dir), env=log_env, input=script)
    assert proc.returncode == 0, proc.stderr
    assert ":json" in proc.stderr and ":json" not in proc.stdout  # help text is not an answer
    assert ">>> Step 3: Answer" in proc.stdout
    assert '"query": "How many epochs?"' in proc.stdout
    # an unknown :command is an error, never sent to the pipeline as a question
    assert "error: unknown command :frobnicate" in proc.stderr and ":frobnicate" not in proc.stdout
    assert "stop-words" in proc.stdout  # a bad query did not end the session
    assert "Traceback" not in proc.stderr


def test_interactive_json_output_is_parseable(paper_index_dir: Path, log_env) -> None:
    """With --json and piped input, stdout holds only the answers: no banner, no prompts."""
    script = "What is AdaRouter's accuracy on EUR/USD?\nHow many epochs?\n"
    proc = run_cli("interactive", "--index", str(paper_index_dir), "--json", env=log_env, input=script)
    assert proc.returncode == 0, proc.stderr
    docs = [json.loads(part) for part in proc.stdout.replace("}\n{", "}\n\x00{").split("\x00")]
    assert [d["query"] for d in docs] == ["What is AdaRouter's accuracy on EUR/USD?", "How many epochs?"]
    assert "query>" not in proc.stdout and "TreeRAG interactive" not in proc.stdout


def test_usage_errors_are_one_line(log_env) -> None:
    for argv in (["query"], ["query", "--index", "x", "-q", "y", "--top-k", "many"], ["nosuchcommand"],
                 ["history", "--limit", "0"]):
        proc = run_cli(*argv, env=log_env, fresh_process=True)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "usage:" in run_cli("query", "--help", env=log_env).stdout


def test_history_and_show_round_trip(paper_index_dir: Path, log_env) -> None:
    q = run_cli("query", "--index", str(paper_index_dir), "--query", "What is the Static Router baseline?",
                "--json", env=log_env)
    run_id = json.loads(q.stdout)["run_id"]
    hist = run_cli("history", env=log_env)
    assert hist.returncode == 0 and run_id[:12] in hist.stdout and "Static Router" in hist.stdout
    shown = run_cli("show", run_id[:8], "--json", env=log_env)
    assert json.loads(shown.stdout)["run_id"] == run_id
    text = run_cli("show", run_id[:8], env=log_env)
    assert ">>> Step 2: Hybrid Retrieval + Rerank" in text.stdout
    # a run printed by `query` prints the same from the log, context included
    printed = run_cli("query", "--index", str(paper_index_dir), "--query", "What is the Static Router baseline?",
                      env=log_env)
    footer_id = re.search(r"\| run ([0-9a-f]{8})\]", printed.stdout).group(1)
    again = run_cli("show", footer_id, env=log_env)
    assert ">>> Context: " in printed.stdout and again.stdout == printed.stdout
    missing = run_cli("show", "ffffffffffff", env=log_env)
    assert missing.returncode != 0 and "no recorded run" in missing.stderr


def test_show_prints_runs_logged_before_context_assembly(paper_index_dir: Path, log_env) -> None:
    import sqlite3

    from utils.run_log import RunLog
    from utils.run_record import RunRecord

    q = run_cli("query", "--index", str(paper_index_dir), "--query", "How many epochs?", "--json", "--no-log",
                env=log_env)
    old = json.loads(q.stdout)
    old["run_id"] = "0123456789abcdef"
    log_path = Path(log_env["TREERAG_LOG"])
    assert RunLog(log_path, warn=print).record(RunRecord.from_dict(old))
    for key in ("context", "record_version", "graph"):  # a first-version record, before context assembly
        del old[key]
    with sqlite3.connect(log_path) as conn:
        conn.execute("UPDATE runs SET result = ? WHERE run_id = ?", (json.dumps(old), old["run_id"]))
    shown = run_cli("show", "0123456789", env=log_env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout.splitlines()
    assert ">>> Step 2: Hybrid Retrieval + Rerank" in out and ">>> Step 3: Answer" in out
    assert not any(l.startswith(">>> Context") for l in out)


def test_no_log_records_nothing(paper_index_dir: Path, log_env) -> None:
    run_cli("query", "--index", str(paper_index_dir), "--query", "epochs", "--no-log", env=log_env)
    assert not Path(log_env["TREERAG_LOG"]).exists()


def test_unwritable_log_never_fails_a_query(paper_index_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = {"TREERAG_LOG": str(blocker / "runs.sqlite3"), "TREERAG_CACHE_DIR": str(tmp_path / "c")}
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", "epochs", env=env)
    assert proc.returncode == 0 and ">>> Step 3: Answer" in proc.stdout
    assert "run log unavailable" in proc.stderr


def test_bad_llm_timeout_is_one_line(paper_index_dir: Path, log_env) -> None:
    proc = run_cli("query", "--index", str(paper_index_dir), "--query", "epochs", "--llm-timeout", "soon",
                   env=log_env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "timeout" in proc.stderr


def test_audit_stages_are_snapshots_shown_by_show(paper_index_dir: Path, log_env, tmp_path: Path) -> None:
    """The union ordering re-scores candidates after the fusion stage recorded them: the recorded
    fusion entries keep the fused scores (no later-stage keys), the final list carries the new ones."""
    cfg = tmp_path / "union.toml"
    cfg.write_text('document_order = "union-learned"\n')
    q = run_cli("--config", str(cfg), "query", "--index", str(paper_index_dir),
                "--query", "What is AdaRouter's accuracy on EUR/USD?", "--json", env=log_env)
    assert q.returncode == 0, q.stderr
    run = json.loads(run_cli("show", json.loads(q.stdout)["run_id"][:10], "--json", env=log_env).stdout)
    fusion, final = run["stages"]["fusion"], run["step2_retrieved"]
    assert fusion and final and all("union_score" in h["scores"] for h in final)
    assert not any("union_score" in h["score_details"] or "leaf_prior" in h["score_details"] for h in fusion)
    assert all(h["score"] == h["score_details"]["fused_score"] for h in fusion)
    # the same chunk, two stages, two different scores: the fusion stage kept its own
    first = final[0]
    same = [h for h in fusion if h["chunk_id"] == first["chunk_id"]]
    assert same and same[0]["score_details"]["fused_score"] == first["scores"]["fused_score"]
    assert first["scores"]["union_score"] != same[0]["score"] or first["scores"]["leaf_prior"] == 0
