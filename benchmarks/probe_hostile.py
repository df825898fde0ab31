"""Hostile-input probe: every kind of attack the threat model covers, at a size a CI run can afford.

Run: python benchmarks/probe_hostile.py [--keep] [--only inputs,outputs,cli,service,...]
(about ten minutes on 2 cores; every server, stub or TreeRAG's own, on 127.0.0.1)

Each CLI probe runs the CLI (or a short Python API script) in a fresh process with a deadline and
records: exit code, whether a traceback was printed, whether it hung past the deadline, the
process's peak RSS, and probe-specific facts (a secret printed, a file read from outside the
input, an update lost). Each service probe sends one request (or a hostile connection) to a real
``main.py serve`` process and records the HTTP status, a hang, and what the reply says; the
server's own log is searched for tracebacks when it stops. The summary prints

    probes, tracebacks (server log included), HTTP 500s, hangs, peak RSS on hostile inputs,
    lost updates, secrets printed

and the probes that failed a goal. Goals: 0 tracebacks, 0 500s, 0 hangs, peak RSS <= 1 GB and,
for a hostile file under 50 MB, RSS above the CLI's own footprint (measured in the same run on a
one-line document) <= 20x the file's size; 0 lost updates, 0 secrets printed, 0 files read from
outside the input, every refusal one line.
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
RSS_FILE_FACTOR = 20
"""A hostile file under 50 MB may cost at most this many times its size above the CLI's footprint."""


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
BASE_RSS_KB = 0
"""Peak RSS of indexing a one-line document (the CLI's own footprint), measured first."""


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


def skipped(o: Outcome, rel: str, needle: str) -> Outcome:
    """A folder build that must succeed with ``rel`` skipped by a warning naming ``needle``."""
    if o.rc != 0:
        o.problems.append(f"build failed: {o.stderr.strip()[:160]}")
    elif not any(ln.startswith(f"warning: skipped {rel}") and needle in ln for ln in o.stderr.splitlines()):
        o.problems.append(f"no warning naming {needle} for {rel}")
    return o


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

# --------------------------------------------------------------------------- reader output (round 4)

def sized(o: Outcome, path: Path) -> Outcome:
    """Hold a probe of one hostile file to the size goal: RSS above the CLI's footprint <= 20x the file."""
    size = path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    if size < 50 << 20 and BASE_RSS_KB and o.rss_kb - BASE_RSS_KB > RSS_FILE_FACTOR * size / 1024:
        o.problems.append(f"RSS {o.rss_kb // 1024} MB is {(o.rss_kb - BASE_RSS_KB) * 1024 / max(size, 1):.0f}x "
                          f"the {size / 1024:.0f} KB file above the CLI's {BASE_RSS_KB // 1024} MB")
    return o


def probe_outputs() -> None:
    global BASE_RSS_KB
    one = WORK / "one.md"
    one.write_text("# One\n\nA single line of text.\n", encoding="utf-8")
    BASE_RSS_KB = run("build a one-line document (the CLI's footprint)", index(one, WORK / "idx-one")).rss_kb

    page = WORK / "td.html"
    page.write_text("<html><body><h1>T</h1><table>" + "".join(f"<tr><td>cell {i}<td>more" for i in range(4000))
                    + "</table></body></html>", encoding="utf-8")
    o = sized(run("HTML table of 4,000 rows without </td></tr> (96 KB)", index(page, WORK / "idx-td")), page)
    meta = WORK / "idx-td" / "metadata.json"
    if o.rc == 0 and meta.is_file():
        chunks = json.loads(meta.read_text(encoding="utf-8"))["counts"]["chunks"]
        if chunks > 2000:
            o.problems.append(f"{chunks:,} chunks from a 96 KB table (quadratic)")
    elif o.rc != 0:
        o.problems.append("a valid table was not read")

    for item, outer in (("li", "ul"), ("p", "div")):
        page = WORK / f"{item}600.html"
        page.write_text(f"<html><body><{outer}>" + f"<{item}>item " * 600 + f"</{outer}></body></html>", encoding="utf-8")
        o = run(f"600 unclosed <{item}> (valid HTML)", index(page, WORK / f"idx-{item}600"))
        if o.rc != 0:
            o.problems.append("valid HTML refused")

    src = folder("md-headings")
    with open(src / "h.md", "w", encoding="utf-8") as fh:
        fh.write("".join(f"# H{i}\n" for i in range(1_000_000)))
    sized(skipped(run("Markdown of 1,000,000 headings (11 MB) in a folder", index(src, WORK / "idx-mdh")),
                  "h.md", "max_headings"), src / "h.md")
    page = WORK / "h200k.md"
    page.write_text("".join(f"## S{i}\n\ntext {i}\n\n" for i in range(200_000)), encoding="utf-8")
    o = sized(run("Markdown of 200,000 headings with text, alone", index(page, WORK / "idx-h200k")), page)
    refused(o, "max_headings")
    page = WORK / "numbered.txt"
    page.write_text("".join(f"{i}. Heading Number\n\nbody text here.\n\n" for i in range(200_000)), encoding="utf-8")
    sized(run("text of 200,000 numbered lines (8 MB)", index(page, WORK / "idx-numbered"), deadline=300), page)
    page = WORK / "line.md"
    with open(page, "w", encoding="utf-8") as fh:
        fh.write("# One line\n\n" + "word " * 4_000_000 + "\n")
    sized(run("one 20 MB line", index(page, WORK / "idx-line"), deadline=600), page)
    page = WORK / "elements.html"
    page.write_text("<html><body>" + "<div><b>x</b></div>" * 140_000 + "</body></html>", encoding="utf-8")
    sized(run("HTML of 280,000 elements", index(page, WORK / "idx-elements"), deadline=300), page)


# --------------------------------------------------------------------------- CLI round 4

def probe_cli() -> None:
    with StubServer(default=StubResponse(200, openai_chat_body("Fifty epochs \ud800 [1]"))) as srv:
        for extra in ((), ("--json",), ("--no-cache",)):
            o = run(f"LLM reply with a lone surrogate {' '.join(extra)}",
                    ["query", "--index", str(WORK / "idx-good"), "--llm", "openai:gpt-4o-mini", "--locator", "keyword",
                     "-q", "How many epochs?", *extra],
                    env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.url + "/v1"})
            if o.rc != 0:
                o.problems.append("the question failed")

    esc = WORK / "escdocs"
    esc.mkdir()
    body = " ".join(f"AlphaNet trains BetaSet with GammaLoss in round {i}." for i in range(80))
    (esc / "e.md").write_text(f"# T\x1b]0;PWNED\x07itle\n\n## Sec\x1b[31mRED\x1b[0m\n\n{body}\n", encoding="utf-8")
    run("index headings with escape sequences", index(esc, WORK / "idx-esc", "--kg", "rules", "--kg-min-leaf-chars", "100"))
    o = run("graph prints headings with escape sequences", ["graph", "--index", str(WORK / "idx-esc")])
    if "\x1b" in o.stdout or "\x07" in o.stdout:
        o.problems.append("raw escape sequences on stdout")
    leaf = next((ln.split()[0] for ln in o.stdout.splitlines()[1:] if ln.strip()), "0002")
    o = run("graph --leaf prints node names with escape sequences", ["graph", "--index", str(WORK / "idx-esc"), "--leaf", leaf])
    if "\x1b" in o.stdout or "\x07" in o.stdout:
        o.problems.append("raw escape sequences on stdout")

    cwd = WORK / "hashdim"
    cwd.mkdir()
    for dim in ("1099511627776", "10000000"):
        (cwd / "treerag.toml").write_text(f"hash_dim = {dim}\n", encoding="utf-8")
        refused(run(f"hash_dim = {dim}", index(PAPER, WORK / "idx-hashdim"), cwd=cwd), "hash_dim")

    fifo = WORK / "log.fifo"
    os.mkfifo(fifo)
    refused(run("history --log FIFO", ["history", "--log", str(fifo)], deadline=30), "FIFO")
    refused(run("show --log FIFO", ["show", "abcdef12", "--log", str(fifo)], deadline=30), "FIFO")

    docs = WORK / "linkdocs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n## One\n\nalpha epochs.\n", encoding="utf-8")
    real, link = WORK / "real-idx", WORK / "link-idx"
    run("base index for --output LINK", index(docs, real))
    link.symlink_to(real)
    before = json.loads((real / "metadata.json").read_text(encoding="utf-8"))["build_id"]
    (docs / "a.md").write_text("# A\n\n## One\n\nCHANGED.\n\n## Two\n\nnew.\n", encoding="utf-8")
    o = run("index --output LINK (a symlink to an index)", index(docs, link))
    after = json.loads((real / "metadata.json").read_text(encoding="utf-8"))["build_id"]
    if o.rc == 0 and (not link.is_symlink() or after == before):
        o.problems.append("the symlink was replaced and the linked index left stale")
    elif o.rc != 0 and not (o.stderr.startswith("error: ") and o.stderr.count("\n") == 1):
        o.problems.append("refused without one line")

    script = ("import os, signal, sys\nsys.path.insert(0, %r)\nimport indexing.build_output as b\n"
              "real = b.replace_directory\n"
              "def swap(*a, **k):\n    out = real(*a, **k)\n    os.kill(os.getpid(), signal.SIGINT)\n    return out\n"
              "b.replace_directory = swap\nimport main\nsys.exit(main.main(sys.argv[1:]))\n") % str(ROOT)
    before = json.loads((real / "metadata.json").read_text(encoding="utf-8"))["build_id"]
    o = run("Ctrl-C just after the swap", ["-c", script, *index(docs, real, "--rebuild")], python=True)
    after = json.loads((real / "metadata.json").read_text(encoding="utf-8"))["build_id"]
    if after != before and (o.rc != 0 or "interrupted" in o.stderr):
        o.problems.append("said 'interrupted' though the new index is in place")


# --------------------------------------------------------------------------- the service

SERVICE_500 = 0
SERVER_TRACEBACKS = 0


def http(url: str, method: str, path: str, *, body: bytes = b"", headers: dict[str, str] | None = None,
         timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """One request over a raw socket (any Host, any header), read to the end; status 0 when none came."""
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(url)
    h = {"Host": u.netloc, "Connection": "close", **(headers or {})}
    if body or method == "POST":
        h.setdefault("Content-Length", str(len(body)))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items() if v is not None) + "\r\n"
    with socket.create_connection((u.hostname, u.port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + body)
        data = b""
        try:
            while True:
                part = sock.recv(65536)
                if not part:
                    break
                data += part
        except (socket.timeout, ConnectionResetError):
            pass
    if not data.startswith(b"HTTP/"):
        return 0, {}, data
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split()[1]), fields, rest


def service(name: str, status: int, expected: tuple[int, ...], body: bytes = b"", seconds: float = 0.0,
            hung: bool = False) -> Outcome:
    """Record one service probe: a 500 and a status outside ``expected`` are problems."""
    global SERVICE_500
    o = Outcome(name, status, seconds, 0, False, hung, "", body[:300].decode("utf-8", "replace"))
    if status == 500:
        SERVICE_500 += 1
        o.problems.append("HTTP 500")
    if hung:
        o.problems.append("connection held open")
    elif status not in expected:
        o.problems.append(f"status {status}, expected {'/'.join(map(str, expected))}")
    RESULTS.append(o)
    return o


def _server_log(name: str, srv, rss_kb: int = 0) -> None:
    """The server's own output: every traceback in it is a failure."""
    global SERVER_TRACEBACKS
    text = srv.output()
    n = text.count("Traceback (most recent call last)")
    SERVER_TRACEBACKS += n
    o = Outcome(f"server log: {name}", srv.proc.returncode, 0.0, rss_kb, n > 0, False, text[-2000:], "")
    if n:
        o.problems.append(f"{n} traceback(s) in the server log")
    if rss_kb > RSS_GOAL_KB:
        o.problems.append(f"server peak RSS {rss_kb // 1024} MB")
    if SECRET in text:
        o.problems.append("printed the password")
    RESULTS.append(o)


def _peak_rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            return next((int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def _drip(url: str, path: str, lines: list[bytes], every: float, limit: float) -> tuple[bool, float]:
    """Send ``lines`` one every ``every`` seconds (then nothing); True if the server still held the
    connection after ``limit`` seconds."""
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(url)
    t0 = time.monotonic()
    with socket.create_connection((u.hostname, u.port), timeout=every) as sock:
        i = 0
        while time.monotonic() - t0 < limit:
            try:
                if i < len(lines):
                    sock.sendall(lines[i])
                    i += 1
                if sock.recv(65536) == b"":
                    return False, time.monotonic() - t0
            except socket.timeout:
                continue
            except OSError:
                return False, time.monotonic() - t0
    return True, time.monotonic() - t0


def probe_service() -> None:
    from tests.serve_process import running_server

    good = WORK / "idx-good"
    other = WORK / "idx-other"
    run("another index (for the run log)", index(PAPER, other))
    log = WORK / "serve-runs.sqlite3"
    env = {"TREERAG_LOG": str(log), "TREERAG_CACHE_DIR": str(WORK / "cache")}
    run("a CLI question on another index, logged", ["query", "--index", str(other), "--mock", "-q",
                                                    "SECRET-PROJECT-X what optimizer?"], env=env)
    ok_json = json.dumps({"question": "How many epochs?"}).encode()
    with running_server("--index", str(good), "--mock", env=env) as srv:
        url, port = srv.url, srv.url.rsplit(":", 1)[1]
        j = {"Content-Type": "application/json"}
        st, _, b = http(url, "GET", "/api/health")
        service("health on a fresh server", st, (200,), b)
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", ""):
            st, _, b = http(url, "GET", "/api/documents", headers={"Host": host})
            service(f"GET /api/documents with Host {host!r} (DNS rebinding)", st, (421, 400), b)
        st, _, b = http(url, "POST", "/api/query", body=ok_json,
                        headers={"Content-Type": "text/plain", "Origin": "https://evil.example"})
        service("cross-site simple POST /api/query (text/plain, foreign Origin)", st, (403, 415), b)
        st, _, b = http(url, "POST", "/api/query", body=ok_json, headers={**j, "Origin": "https://evil.example"})
        service("POST /api/query with a foreign Origin", st, (403,), b)
        st, _, b = http(url, "POST", "/api/query", body=ok_json, headers={"Content-Type": "text/plain"})
        service("POST /api/query as text/plain", st, (415,), b)
        st, _, b = http(url, "POST", "/api/query", body=ok_json, headers=j)
        service("a normal question", st, (200,), b)
        if st == 200 and str(good.resolve()).encode() in b:
            RESULTS[-1].problems.append("the server's absolute index path sent to the client")
        for route in ("/api/query", "/api/search"):
            st, _, b = http(url, "POST", route, body=b'{"question":"epochs \\ud800"}', headers=j)
            service(f"lone surrogate in the question: {route}", st, (400, 200), b)
        st, _, b = http(url, "POST", "/api/query/stream", body=b'{"question":"epochs \\ud800"}', headers=j)
        o = service("lone surrogate in the question: stream", st, (400, 200), b)
        if st == 200 and b"event: result" not in b and b"event: error" not in b:
            o.problems.append("the stream ended with no result or error event")
        for shape, body in (("array", b"[" * 30_000 + b"]" * 30_000),
                            ("object", b'{"a":' * 10_000 + b"1" + b"}" * 10_000)):
            for route in ("/api/query", "/api/search"):
                st, _, b = http(url, "POST", route, body=body, headers=j)
                service(f"JSON {shape} nested deep: {route}", st, (400,), b)
        for k in range(5):
            import socket

            with socket.create_connection(("127.0.0.1", int(port))) as sock:
                sock.sendall(b"POST /api/query HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode()
                             + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"question\":")
            time.sleep(0.2)
        st, _, b = http(url, "GET", "/api/runs?limit=500")
        o = service("/api/runs lists only this index's runs", st, (200,), b)
        if b"SECRET-PROJECT-X" in b:
            o.problems.append("a CLI run on another index was listed")
        size0 = log.stat().st_size if log.exists() else 0
        for _ in range(50):
            http(url, "POST", "/api/query", body=ok_json, headers=j)
        grew = (log.stat().st_size if log.exists() else 0) - size0
        o = service(f"run log growth over 50 questions: {grew / 50 / 1024:.1f} KB a question", 200, (200,))
        o.stdout = f"{grew} bytes"
        t0 = time.monotonic()
        held, secs = _drip(url, "/api/health", [b"GET /api/health HTTP/1.1\r\n"]
                           + [f"X-Drip-{i}: a\r\n".encode() for i in range(100)], every=2.0, limit=45)
        service("headers dripped one line every 2 s (slowloris)", 0 if held else 408, (408,), seconds=secs, hung=held)
        held, secs = _drip(url, "/api/query", [b"POST /api/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                                b"application/json\r\nContent-Length: 1000\r\n\r\n"]
                           + [b" "] * 100, every=2.0, limit=45)
        service("body dripped one byte every 2 s", 0 if held else 408, (408,), seconds=secs, hung=held)
        held, secs = _drip(url, "/mcp", [b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode()
                                          + b"\r\nAccept: text/event-stream\r\n\r\n"], every=2.0, limit=20)
        service("stateless GET /mcp event stream", 0 if held else 405, (405,), seconds=secs, hung=held)
        _ = t0
        rss = _peak_rss_kb(srv.proc.pid)
        time.sleep(0.5)
    _server_log("hostile requests", srv, rss)

    with StubServer(default=StubResponse(200, openai_chat_body("Fifty epochs \ud800 [1]"))) as stub:
        with running_server("--index", str(good), "--llm", "openai:gpt-4o-mini",
                            env={**env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": stub.url + "/v1"}) as srv:
            st, _, b = http(srv.url, "POST", "/api/query", body=ok_json, headers={"Content-Type": "application/json"})
            service("LLM reply with a lone surrogate: /api/query", st, (200,), b)
            st, _, b = http(srv.url, "POST", "/api/query/stream", body=ok_json,
                            headers={"Content-Type": "application/json"})
            o = service("LLM reply with a lone surrogate: stream", st, (200,), b)
            if b"event: result" not in b:
                o.problems.append("no result event")
        _server_log("LLM surrogate", srv)

    with StubServer(default=StubResponse(200, openai_chat_body("late"), delay=60)) as stub:
        with running_server("--index", str(good), "--llm", "openai:gpt-4o-mini", "--llm-timeout", "20",
                            "--workers", "2",
                            env={**env, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": stub.url + "/v1"}) as srv:
            busy = [threading.Thread(target=http, args=(srv.url, "POST", "/api/query"),
                                     kwargs={"body": ok_json, "headers": {"Content-Type": "application/json"},
                                             "timeout": 60}) for _ in range(2)]
            for t in busy:
                t.start()
            time.sleep(1.5)
            t0 = time.monotonic()
            st, _, b = http(srv.url, "GET", "/api/health", timeout=60)
            secs = time.monotonic() - t0
            o = service(f"/api/health while both workers wait on the LLM: {secs:.1f} s", st, (200,), b, seconds=secs)
            if secs > 2:
                o.problems.append(f"health waited {secs:.1f} s behind the questions")
            for t in busy:
                t.join()
        _server_log("busy workers", srv)

    import socket

    with running_server("--index", str(good), "--mock", "--host", "127.0.0.2", env=env) as srv:
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "p", "version": "1"}}}).encode()
        port = srv.url.rsplit(":", 1)[1]
        url = f"http://127.0.0.2:{port}"
        st, _, b = http(url, "POST", "/mcp", body=init,
                        headers={"Host": f"evil.example:{port}", "Origin": "http://evil.example",
                                 "Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
        service("--host 127.0.0.2: MCP initialize with a foreign Host", st, (421, 403), b)
        st, _, b = http(url, "GET", "/api/documents", headers={"Host": f"evil.example:{port}"})
        service("--host 127.0.0.2: /api/documents with a foreign Host", st, (421, 401), b)
    _server_log("127.0.0.2", srv)
    _ = socket

    big = WORK / "big-tree"
    big.mkdir()
    (big / "s.md").write_text("".join(f"{'#' * (i % 6 + 1)} S{i}\n\nt{i}\n\n" for i in range(15_000)), encoding="utf-8")
    run("index of 15,000 short sections", index(big, WORK / "idx-big-tree"), deadline=300)
    with running_server("--index", str(WORK / "idx-big-tree"), "--mock", env=env) as srv:
        st, _, b = http(srv.url, "GET", "/api/tree", timeout=120)
        o = service(f"GET /api/tree of 15,000 sections: {len(b):,} bytes", st, (200, 413), b)
        if len(b) > 2_000_000:
            o.problems.append(f"{len(b) / 1e6:.1f} MB in one response")
        rss = _peak_rss_kb(srv.proc.pid)
    _server_log("big tree", srv, rss)


def main() -> int:
    global WORK
    steps = {"index": probe_index, "inputs": probe_inputs, "outputs": probe_outputs, "settings": probe_settings,
             "updates": probe_updates, "llm": probe_llm, "cli": probe_cli, "service": probe_service}
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--only", default=",".join(steps),
                    help=f"comma-separated groups to run (default all: {','.join(steps)}; index is always run)")
    args = ap.parse_args()
    chosen = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = [g for g in chosen if g not in steps]
    if unknown:
        ap.error(f"unknown group(s): {', '.join(unknown)}")
    WORK = Path(tempfile.mkdtemp(prefix="treerag-hostile-"))
    try:
        for name, step in steps.items():
            if name in chosen or name == "index":
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - the probe's own failure: the other groups still run
                    RESULTS.append(Outcome(f"probe group {name} crashed", None, 0.0, 0, False, False,
                                           f"{type(exc).__name__}: {exc}", "", [f"probe crashed: {exc}"[:300]]))
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)
    setup = ("build a reference", "first build", "base index", "build a one-line", "another index",
             "a CLI question", "index headings", "index of 15,000")
    hostile = [o for o in RESULTS if not o.name.startswith(setup) and o.rss_kb]
    secrets = sum(1 for o in RESULTS if "printed the password" in o.problems)
    in_log = sum(1 for o in RESULTS if o.name.startswith("server log") and o.traceback)
    print(f"probes: {len(RESULTS)}")
    print(f"tracebacks: {sum(o.traceback for o in RESULTS)} probes ({in_log} server logs holding "
          f"{SERVER_TRACEBACKS} tracebacks)")
    print(f"HTTP 500s: {SERVICE_500}")
    print(f"hangs: {sum(o.hung for o in RESULTS)}")
    worst = max(hostile, key=lambda o: o.rss_kb, default=None)
    if worst is not None:
        print(f"peak RSS on hostile inputs: {worst.rss_kb / 1024:.0f} MB ({worst.name}); "
              f"CLI footprint {BASE_RSS_KB / 1024:.0f} MB")
    print(f"lost updates: {LOST_UPDATES}")
    print(f"secrets printed: {secrets}")
    for o in RESULTS:
        if o.name.startswith(("run log growth", "GET /api/tree", "/api/health while")):
            print(f"measured: {o.name}")  # figures without a pass mark of their own (or with one, below)
    failed = [o for o in RESULTS if o.problems]
    print(f"probes failing a goal: {len(failed)}")
    for o in failed:
        print(f"  {o.name}: {'; '.join(o.problems)} (rc={o.rc}) {(o.stderr or o.stdout).strip()[:200]!r}")
    return 1 if failed or LOST_UPDATES else 0


WORK = Path(".")
QUERY_GOOD: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
