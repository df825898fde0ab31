"""Hostile-input probe: every kind of attack the threat model covers, at a size a CI run can afford.

Run: python benchmarks/probe_hostile.py [--keep]   (about two minutes on 2 cores; stub servers on 127.0.0.1)

Each probe runs the CLI (or a short Python API script) in a fresh process with a deadline and
records: exit code, whether a traceback was printed, whether it hung past the deadline, the
process's peak RSS, and probe-specific facts (a secret printed, a file read from outside the
input, an update lost). The summary prints

    probes, tracebacks, hangs past deadline, peak RSS on hostile inputs, lost updates, secrets printed

and the probes that failed a goal. Goals: 0 tracebacks, 0 hangs, peak RSS <= 1 GB, 0 lost
updates, 0 secrets printed, 0 files read from outside the input, every refusal one line.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stub_servers import StubResponse, StubServer, openai_chat_body  # noqa: E402

PY = sys.executable
MAIN = str(ROOT / "main.py")
PAPER = str(ROOT / "test_data" / "test_paper.md")
SECRET = "SECRETPW"
OUTSIDE_MARK = "OUTSIDE-THE-INPUT-7f3a"
DEADLINE = 60.0
RSS_GOAL_KB = 1024 * 1024


@dataclass
class Outcome:
    name: str
    rc: int | None
    seconds: float
    rss_kb: int
    traceback: bool
    hung: bool
    stderr: str
    stdout: str
    problems: list[str] = field(default_factory=list)


RESULTS: list[Outcome] = []
LOST_UPDATES = 0


def run(name: str, args: list[str | bytes], *, cwd: Path | None = None, env: dict | None = None,
        deadline: float = DEADLINE, during=None, python: bool = False) -> Outcome:
    """One fresh process; ``during(proc)`` runs while it does (to race it)."""
    cmd = [PY, *args] if python else [PY, MAIN, *args]
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "TREERAG_"))}
    e.update(env or {})
    e.setdefault("TREERAG_LOG", str(WORK / "runs.sqlite3"))
    e.setdefault("TREERAG_CACHE_DIR", str(WORK / "cache"))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(cwd or WORK), env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    out: dict[str, bytes] = {}

    def drain(stream, key):
        out[key] = stream.read()

    readers = [threading.Thread(target=drain, args=(proc.stdout, "out")),
               threading.Thread(target=drain, args=(proc.stderr, "err"))]
    for r in readers:
        r.start()
    if during is not None:
        during(proc)
    hung = False
    status = rusage = None
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > deadline:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    stderr = out.get("err", b"").decode("utf-8", "replace")
    o = Outcome(name, proc.returncode, time.monotonic() - t0, rusage.ru_maxrss, "Traceback" in stderr, hung,
                stderr, out.get("out", b"").decode("utf-8", "replace"))
    if o.traceback:
        o.problems.append("traceback")
    if hung:
        o.problems.append(f"hung past {deadline:g} s")
    if o.rss_kb > RSS_GOAL_KB:
        o.problems.append(f"peak RSS {o.rss_kb // 1024} MB")
    RESULTS.append(o)
    return o


def refused(o: Outcome, needle: str = "") -> None:
    """The probe must end in a non-zero exit with one ``error:`` line (containing ``needle``)."""
    if o.rc == 0:
        o.problems.append("accepted hostile input")
    elif not o.stderr.startswith("error: ") or o.stderr.count("\n") != 1:
        o.problems.append("not a one-line error")
    elif needle and needle not in o.stderr:
        o.problems.append(f"error does not say {needle!r}")


def skipped(o: Outcome, rel: str, needle: str) -> None:
    """A folder build that must succeed with ``rel`` skipped by a warning naming ``needle``."""
    if o.rc != 0:
        o.problems.append(f"build failed: {o.stderr.strip()[:160]}")
    elif not any(ln.startswith(f"warning: skipped {rel}") and needle in ln for ln in o.stderr.splitlines()):
        o.problems.append(f"no warning naming {needle} for {rel}")


def folder(name: str, n: int = 3) -> Path:
    src = WORK / name
    src.mkdir()
    for i in range(n):
        (src / f"d{i:03d}.md").write_text(f"# Doc {i}\n\nSome text of document {i} about encoders.\n", encoding="utf-8")
    return src


def index(src: Path | str, out: Path | str, *extra: str) -> list[str]:
    return ["index", "--input", str(src), "--output", str(out), "--mock", "--quiet", *extra]


# --------------------------------------------------------------------------- input documents

def probe_inputs() -> None:
    secret = WORK / "secret.md"
    secret.write_text(f"# Secret\n\n{OUTSIDE_MARK} root:x:0:0\n", encoding="utf-8")
    for swap in ("fifo", "symlink"):
        src = folder(f"race-{swap}", 600)
        target = src / "zz.md"
        target.write_text("# Last\n\nThe last one.\n", encoding="utf-8")

        def race(proc, target=target, swap=swap):
            time.sleep(0.3)
            target.unlink()
            if swap == "fifo":
                os.mkfifo(target)
            else:
                os.symlink(secret, target)

        o = run(f"swap {swap} into the input while indexing", index(src, WORK / f"idx-race-{swap}"), during=race)
        if o.rc not in (0,) and not o.stderr.startswith("error: "):
            o.problems.append("build failed")
        chunks = WORK / f"idx-race-{swap}" / "chunks.jsonl"
        if chunks.is_file() and OUTSIDE_MARK in chunks.read_text(encoding="utf-8", errors="replace"):
            o.problems.append("read a file outside the input")

    src = folder("huge")
    with open(src / "huge.txt", "wb") as fh:
        fh.truncate(3 << 30)
    skipped(run("3 GB sparse text file in a folder", index(src, WORK / "idx-huge")), "huge.txt", "max_input_bytes")

    src = folder("bomb")
    head = b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>'
    with zipfile.ZipFile(src / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')
        with zf.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(head)
            block = b"a" * (1 << 20)
            for _ in range(600):
                part.write(block)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    skipped(run(".docx whose document.xml unpacks to 600 MB", index(src, WORK / "idx-bomb")), "bomb.docx",
            "max_unpacked_bytes")

    for depth in (1_000, 100_000):
        src = folder(f"deep-{depth}")
        (src / "deep.html").write_text("<html><body>" + "<div>" * depth + "x" + "</div>" * depth + "</body></html>",
                                       encoding="utf-8")
        skipped(run(f"HTML nested {depth:,} deep", index(src, WORK / f"idx-deep-{depth}")), "deep.html", "max_html")

    src = folder("headings")
    with open(src / "many.html", "w", encoding="utf-8") as fh:
        fh.write("<html><body>")
        for i in range(1_000_000):
            fh.write(f"<h2>H{i}</h2>")
        fh.write("</body></html>")
    skipped(run("HTML of 1,000,000 headings", index(src, WORK / "idx-headings")), "many.html", "max_")

    src = WORK / "names"
    src.mkdir()
    for raw, text in ((b"caf\xe9.md", "# One\n\nFirst cafe.\n"), (b"caf\\xe9.md", "# Two\n\nSecond cafe.\n"),
                      (b"new\nline.md", "# Three\n\nA newline in the name.\n")):
        with open(os.path.join(os.fsencode(src), raw), "w", encoding="utf-8") as fh:
            fh.write(text)
    o = run("two names that print the same, a newline in a name", index(src, WORK / "idx-names"))
    if o.rc != 0 or "prints the same" not in o.stderr:
        o.problems.append("names that print the same were not told apart")
    q = run("citation of a file with a newline in its name",
            ["query", "--index", str(WORK / "idx-names"), "--mock", "--no-log", "-q", "newline in the name"])
    if any(ln.strip() == "line.md" or ln.startswith("line.md:") for ln in q.stdout.splitlines()):
        q.problems.append("a citation line was broken by a newline")


# --------------------------------------------------------------------------- index paths and files

def _npy(shape: str, payload: int) -> bytes:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    body = (header + " " * pad + "\n").encode("ascii")
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + b"\0" * payload


def probe_index() -> None:
    good = WORK / "idx-good"
    o = run("build a reference index", index(PAPER, good))
    if o.rc != 0:
        o.problems.append("could not build the reference index")
        return
    empty = WORK / "empty-cwd"
    empty.mkdir()
    for args in (["query", "--index", "", "--mock", "--no-log", "-q", "x"],
                 ["query", "--index", "/", "--mock", "--no-log", "-q", "x"],
                 ["verify", "--index", ""], ["verify", "--index", "/"], ["verify", "--index", "."],
                 index(PAPER, ""), index(PAPER, "/")):
        refused(run(f"index path {args[0]} {args[2]!r}", args, cwd=empty))
    o = run("query --index . from inside the index", ["query", "--index", ".", "--mock", "--no-log", "-q", "encoder"],
            cwd=good)
    if o.rc != 0:
        o.problems.append("'.' from inside the index failed")

    from tests.test_index_store import _restamp  # the manifest restamped, as a hostile author would
    for shape, payload in (("(4294967296, 4294967296)", 0), ("(4611686018427387904, 4)", 0), ("(-1, -1)", 4)):
        d = WORK / f"idx-npy-{payload}-{abs(hash(shape)) % 1000}"
        shutil.copytree(good, d)
        (d / "embeddings.npy").write_bytes(_npy(shape, payload))
        _restamp(d)
        refused(run(f"crafted .npy shape {shape}: verify", ["verify", "--index", str(d)]), "embeddings.npy")
        refused(run(f"crafted .npy shape {shape}: query", ["query", "--index", str(d), "--mock", "--no-log", "-q", "x"]),
                "embeddings.npy")

    planted = WORK / "plant" / ".myidx.previous"
    planted.mkdir(parents=True)
    (planted / "notes.txt").write_text("not an index", encoding="utf-8")
    o = run("query next to a planted .NAME.previous",
            ["query", "--index", str(WORK / "plant" / "myidx"), "--mock", "--no-log", "-q", "x"])
    refused(o)
    if (WORK / "plant" / "myidx").exists():
        o.problems.append("a query renamed a directory that is not an index into place")


# --------------------------------------------------------------------------- settings and CLI values

def probe_settings() -> None:
    global QUERY_GOOD
    QUERY_GOOD = ["query", "--index", str(WORK / "idx-good"), "--llm", "mock", "--no-log", "-q", "encoder"]
    cwd = WORK / "cloned-repo"
    cwd.mkdir()
    (cwd / "treerag.toml").write_text('ranker_weights = "/dev/zero"\n', encoding="utf-8")
    refused(run("./treerag.toml: ranker_weights = /dev/zero",
                QUERY_GOOD, cwd=cwd), "/dev/zero")
    fifo = WORK / "weights.fifo"
    os.mkfifo(fifo)
    (cwd / "treerag.toml").write_text(f'ranker_weights = "{fifo}"\n', encoding="utf-8")
    refused(run("./treerag.toml: ranker_weights = a FIFO",
                QUERY_GOOD, cwd=cwd), "FIFO")
    (cwd / "treerag.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    refused(run("TOML nested 100,000 deep", QUERY_GOOD, cwd=cwd), "nested too deeply")
    (cwd / "treerag.toml").unlink()
    os.mkfifo(cwd / "treerag.toml")
    refused(run("./treerag.toml is a FIFO", QUERY_GOOD, cwd=cwd), "FIFO")
    refused(run("history --limit 99999999999999999999", ["history", "--limit", "99999999999999999999"]))

    for uri in (f"seekdb://root:{SECRET}@127.0.0.1:99999/db", f"seekdb://root:{SECRET}@127.0.0.1:abc/db",
                f"seekdb://root:{SECRET}@/db", f"seekdb://root:{SECRET}@127.0.0.1:2881/",
                f"seekdb://:{SECRET}@127.0.0.1:2881/db", f"seekdb://root:{SECRET}@127.0.0.1:2881/d'b",
                f"seekdb://root:SE'{SECRET}@127.0.0.1:2881/db", f"seekdb://root:{SECRET}",
                f"seekdb://root:{SECRET}@127.0.0.1:2881/db#x", f"seekdb://root:{SECRET}@127.0.0.1:2881/db?tenant=a;b",
                f"seekdb://root:{SECRET}/x@127.0.0.1:2881/db"):
        o = run(f"malformed --store {uri[:40]}…", index(PAPER, WORK / "idx-store", "--store", uri))
        refused(o)
        if SECRET in o.stderr + o.stdout or "CRETPW" in o.stderr + o.stdout:
            o.problems.append("printed the password")

    docs = WORK / "store-into-docs"
    docs.mkdir()
    (docs / "mine.md").write_text("# Mine\n", encoding="utf-8")
    o = run("seekdb:///DIR of someone's documents", index(PAPER, WORK / "idx-into-docs", "--store", f"seekdb://{docs}"))
    refused(o, "not a seekdb database")
    if sorted(p.name for p in docs.iterdir()) != ["mine.md"]:
        o.problems.append("the engine wrote into a non-empty directory")

    api = ("import sys; sys.path.insert(0, %r)\n"
           "from pipeline import TreeRAG\nfrom utils.errors import TreeRAGError\n"
           "bad = 0\n"
           "for kw in ({'llm_timeout': float('nan')}, {'llm_timeout': 0}, {'llm_timeout': -1}, {'llm': 123}):\n"
           "    try:\n        TreeRAG.open(%r, **{'llm': 'mock', **kw})\n        bad += 1\n"
           "    except TreeRAGError:\n        pass\n"
           "rag = TreeRAG.open(%r, llm='mock')\n"
           "for call in (lambda: rag.ask(123), lambda: rag.ask('x', documents='a.md')):\n"
           "    try:\n        call()\n        bad += 1\n    except TreeRAGError:\n        pass\n"
           "print('accepted', bad)\n") % (str(ROOT), str(WORK / "idx-good"), str(WORK / "idx-good"))
    o = run("Python API argument checks", ["-c", api], python=True)
    if "accepted 0" not in o.stdout:
        o.problems.append(f"API accepted bad arguments: {o.stdout.strip()}")

    raw_idx = os.path.join(os.fsencode(WORK), b"idx\xff")
    run("build into a path with a 0xFF byte", ["index", "--input", PAPER, "--output", raw_idx, "--mock", "--quiet"])
    o = run("--json with a 0xFF byte in the index path",
            ["query", "--index", raw_idx, "--mock", "--no-log", "--json", "-q", "encoder"])
    try:
        json.loads(o.stdout.encode("utf-8", "surrogateescape").decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        o.problems.append("--json output is not valid UTF-8 JSON")


# --------------------------------------------------------------------------- updates

def probe_updates() -> None:
    global LOST_UPDATES
    out = WORK / "idx-perm"
    run("first build (permissions)", index(PAPER, out))
    os.chmod(out, 0o755)
    o = run("update keeps chmod 755", index(PAPER, out))
    if oct(os.stat(out).st_mode & 0o777) != oct(0o755):
        o.problems.append(f"mode became {oct(os.stat(out).st_mode & 0o777)}")

    src = folder("concurrent", 200)
    out = WORK / "idx-concurrent"
    run("base index for concurrent updates", index(src, out))
    for round_ in range(3):
        (src / f"new{round_}.md").write_text(f"# New {round_}\n\nAdded text {round_}.\n", encoding="utf-8")
        spans: list[tuple[float, float, Outcome]] = []

        def one(k: int) -> None:
            t0 = time.monotonic()
            o = run(f"concurrent updater {round_}.{k}", index(src, out))
            spans.append((t0, time.monotonic(), o))

        threads = [threading.Thread(target=one, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ok = [s for s in spans if s[2].rc == 0]
        for s in spans:
            if s[2].rc != 0 and "another build is updating" not in s[2].stderr:
                s[2].problems.append("refused without saying why")
        if len(ok) == 2 and ok[0][0] < ok[1][1] and ok[1][0] < ok[0][1]:
            LOST_UPDATES += 1  # both swapped in while running at the same time: one computed against a stale base


# --------------------------------------------------------------------------- LLM

def probe_llm() -> None:
    def respond_cut(req):
        prompt = req.json()["messages"][-1]["content"]
        if "检索到的证据" in prompt:
            return StubResponse(200, openai_chat_body("AdaRouter reaches 73", finish_reason="length"))
        return StubResponse(200, openai_chat_body('{"thinking": "x", "results": []}'))

    env = {"OPENAI_API_KEY": "sk-test", "TREERAG_CACHE_DIR": str(WORK / "llm-cache")}
    q = ["query", "--index", str(WORK / "idx-good"), "--no-log", "--llm", "openai:gpt-4o-mini", "--locator", "hybrid",
         "--json", "-q", "What is AdaRouter's accuracy on EUR/USD?"]
    with StubServer(respond_cut) as srv:
        o = run("truncated LLM answer", q, env={**env, "OPENAI_BASE_URL": srv.url + "/v1"})
    try:
        if not json.loads(o.stdout).get("answer_truncated"):
            o.problems.append("a truncated answer was not flagged")
    except ValueError:
        o.problems.append("no JSON")
    with StubServer(lambda req: StubResponse(200, openai_chat_body("AdaRouter reaches 73.2%."))) as srv:
        o = run("healthy server after a truncated answer", q, env={**env, "OPENAI_BASE_URL": srv.url + "/v1"})
    try:
        if json.loads(o.stdout)["answer"] != "AdaRouter reaches 73.2%.":
            o.problems.append("the truncated answer was served from the cache")
    except (ValueError, KeyError):
        o.problems.append("no JSON")

    with StubServer(default=StubResponse(200, openai_chat_body("late"), delay=120)) as srv:
        o = run("--summaries llm against a silent server (timeout 5 s)",
                index(PAPER, WORK / "idx-silent", "--summaries", "llm", "--llm", "openai:gpt-4o-mini",
                      "--llm-timeout", "5", "--no-cache"),
                env={**env, "OPENAI_BASE_URL": srv.url + "/v1"}, deadline=90)
        if srv.request_count > 4:
            o.problems.append(f"{srv.request_count} requests to a server that never answered")


def main() -> int:
    global WORK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    WORK = Path(tempfile.mkdtemp(prefix="treerag-hostile-"))
    try:
        for step in (probe_inputs, probe_index, probe_settings, probe_updates, probe_llm):
            step()
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    hostile = [o for o in RESULTS if not o.name.startswith(("build a reference", "first build", "base index"))]
    secrets = sum(1 for o in RESULTS if "printed the password" in o.problems)
    print(f"probes: {len(RESULTS)}")
    print(f"tracebacks: {sum(o.traceback for o in RESULTS)}")
    print(f"hangs past deadline: {sum(o.hung for o in RESULTS)}")
    print(f"peak RSS on hostile inputs: {max(o.rss_kb for o in hostile) / 1024:.0f} MB")
    print(f"lost updates: {LOST_UPDATES}")
    print(f"secrets printed: {secrets}")
    failed = [o for o in RESULTS if o.problems]
    print(f"probes failing a goal: {len(failed)}")
    for o in failed:
        print(f"  {o.name}: {'; '.join(o.problems)} (rc={o.rc}) {o.stderr.strip()[:200]}")
    return 1 if failed or LOST_UPDATES else 0


WORK = Path(".")
QUERY_GOOD: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
