"""``main.py serve`` as a real process on a free 127.0.0.1 port, for the API and browser tests.

The port is chosen by the OS (``--port 0``) and read from the server's start-up line, so two test
runs never race for one. The process is always stopped: terminated (uvicorn's graceful shutdown),
killed if it does not stop, and its output kept for the failure message.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
START_LINE = re.compile(r"on (http://[^/\s]+:\d+)/")
_NO_PROVIDER_ENV = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TREERAG_LLM", "TREERAG_SERVE_TOKEN")


class ServerProcess:
    def __init__(self, proc: subprocess.Popen, url: str, lines: list[str]) -> None:
        self.proc, self.url, self.lines = proc, url, lines

    def output(self) -> str:
        return "".join(self.lines)


@contextmanager
def running_server(*args: str, env: dict[str, str] | None = None, start_timeout: float = 120) -> Iterator[ServerProcess]:
    """``python main.py serve ARGS --port 0``; yields once it listens, stops it on the way out."""
    e = {k: v for k, v in os.environ.items() if k not in _NO_PROVIDER_ENV}
    e.update(env or {})
    e["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "serve", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e, cwd=str(ROOT))
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:  # keeps reading, so a chatty server never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = START_LINE.search(line)
            if m and not url:
                url.append(m.group(1))
                found.set()
        found.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        found.wait(start_timeout)
        if not url:
            raise RuntimeError(f"the server did not start (exit {proc.poll()}):\n{''.join(lines)}")
        yield ServerProcess(proc, url[0], lines)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(timeout=5)
