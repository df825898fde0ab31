#!/usr/bin/env python3
"""A minimal OpenAI-compatible chat server on 127.0.0.1 over a GGUF model (NOT run by CI).

Why this exists: ``llama-cpp-python[server]`` has no prebuilt wheel for this machine and its
source build took 10-40 minutes of a shared 2-core CPU. ``llama-cpp-py-sync`` ships llama.cpp
prebuilt for linux x86_64 (CPU, no download at run time) but no server, so this file is the
server: ``GET /v1/models`` and non-streaming ``POST /v1/chat/completions`` with
``max_tokens``, ``temperature`` and ``response_format = {"type": "json_object"}`` (a GBNF grammar
in llama.cpp, like llama-cpp-python's server). One model, one request at a time: a CPU model
gains nothing from concurrent requests, and a lock keeps a second caller waiting instead of
corrupting the shared context. Each request's prompt and generated tokens and timings are logged
as one JSON line on stderr (``{"perf": ...}``) and, with ``--reply-log``, each reply's text with
them to a JSON-lines file, for the benchmark to read (what the model wrote, not what survived
the client's repair).

    python tools/local_llm/gguf_server.py --model MODEL.gguf --alias qwen --port 8765 --threads 1
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"
MAX_BODY = 4 << 20


@dataclass
class Completion:
    """One finished chat completion with what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    prefill_s: float
    total_s: float


class ChatModel:
    """The loaded model behind a lock; loads on construction (the server needs it at once)."""

    def __init__(self, path: str, n_ctx: int, threads: int) -> None:
        from llama_cpp_py_sync import Llama  # noqa: PLC0415 - optional, benchmark-only dependency

        self.llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                         n_batch=512, verbose=False)
        self.lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], max_tokens: int, temperature: float,
                 json_mode: bool) -> Completion:
        stats: dict[str, Any] = {}
        with self.lock:
            reply = self.llm.create_chat_completion(
                messages, max_tokens=max_tokens, temperature=temperature,
                top_k=1 if temperature <= 0 else 40, seed=0,
                response_format={"type": "json_object"} if json_mode else None,
                on_stats=stats.update)
            text = reply["choices"][0]["message"]["content"]
            n_out = len(self.llm.tokenize(text, add_special=False)) if text else 0
        finish = "length" if n_out >= max_tokens else "stop"
        return Completion(text, int(stats.get("input_tokens") or 0), n_out, finish,
                          float(stats.get("prefill_seconds") or 0.0), float(stats.get("total_seconds") or 0.0))


class Handler(BaseHTTPRequestHandler):
    server_version = "gguf-server/1"
    model: ChatModel
    alias: str
    default_max_tokens: int
    reply_log: str | None = None

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet: perf lines only
        return

    def _send(self, code: int, obj: dict[str, Any]) -> None:
        body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, msg: str) -> None:
        self._send(code, {"error": {"message": msg, "type": "invalid_request_error", "code": code}})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.alias, "object": "model", "owned_by": "local"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}")
            return
        try:
            n = int(self.headers.get("Content-Length") or 0)
            if not 0 < n <= MAX_BODY:
                raise ValueError("missing or oversized body")
            req = json.loads(self.rfile.read(n))
            if not isinstance(req, dict) or not isinstance(req.get("messages"), list):
                raise ValueError("'messages' must be a list")
            if req.get("stream"):
                raise ValueError("stream=true is not supported by this server")
            fmt = req.get("response_format") or {}
            json_mode = isinstance(fmt, dict) and fmt.get("type") == "json_object"
            max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or self.default_max_tokens)
            max_tokens = max(1, min(max_tokens, self.default_max_tokens))
            temperature = float(req.get("temperature") if req.get("temperature") is not None else 0.0)
        except (ValueError, TypeError) as exc:
            self._error(400, str(exc))
            return
        try:
            out = self.model.complete(req["messages"], max_tokens, temperature, json_mode)
        except (ValueError, RuntimeError) as exc:  # context overflow, decode failure
            self._error(400, str(exc))
            return
        perf = {"prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                "max_tokens": max_tokens, "prefill_s": round(out.prefill_s, 3), "total_s": round(out.total_s, 3),
                "finish_reason": out.finish_reason, "json_mode": json_mode}
        print(json.dumps({"perf": perf}), file=sys.stderr, flush=True)
        if self.reply_log:
            with open(self.reply_log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({**perf, "text": out.text}, ensure_ascii=False) + "\n")
        self._send(200, {
            "id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": self.alias,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                         "finish_reason": out.finish_reason}],
            "usage": {"prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
                      "total_tokens": out.prompt_tokens + out.completion_tokens},
        })


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="GGUF file")
    p.add_argument("--alias", default="qwen", help="model id the server answers to")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--max-tokens", type=int, default=1024,
                   help="cap on generated tokens per reply, whatever the client asks (default 1024)")
    p.add_argument("--reply-log", default=None, help="append every reply (text, tokens, timings) to this JSON-lines file")
    args = p.parse_args(argv)
    try:
        model = ChatModel(args.model, args.n_ctx, args.threads)
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        print(f"error: cannot load {args.model}: {exc}", file=sys.stderr)
        return 2
    Handler.model, Handler.alias, Handler.default_max_tokens = model, args.alias, args.max_tokens
    Handler.reply_log = args.reply_log
    httpd = ThreadingHTTPServer((HOST, args.port), Handler)
    print(f"serving {args.alias} on http://{HOST}:{args.port}/v1", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
