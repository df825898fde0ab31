"""What every command of ``main.py`` shares: its messages, the config file under the flags, the LLM's
time limits, JSON output. Light to import: the command line builds its parser with it at every start."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from config import Config, llm_timeout_seconds, parse_seconds


def stderr(msg: str) -> None:
    from utils.render import terminal_safe  # messages can quote file names and document text
    from utils.secrets import redact_secrets  # and a --store URI, whose password never shows

    print(terminal_safe(redact_secrets(msg)), file=sys.stderr, flush=True)


def base_config(args: argparse.Namespace) -> Config:
    """Defaults, overridden by the config file; command-line flags override both."""
    from config import load_config_file

    return load_config_file(Path(args.config) if args.config else None, os.environ)


def llm_timeout(args: argparse.Namespace, config: Config) -> float:
    return llm_timeout_seconds(getattr(args, "llm_timeout", None), os.environ, config.llm_timeout_s)


def llm_budget(args: argparse.Namespace, default: float) -> float:
    """Wall-clock seconds for all LLM calls of one query (or build): --llm-budget, else the config."""
    raw = getattr(args, "llm_budget", None)
    return default if raw is None else parse_seconds(raw, "LLM budget")


def cache_dir() -> Path:
    from utils.llm.factory import default_cache_dir

    return default_cache_dir(os.environ)


def print_json(value: dict[str, Any]) -> None:
    from utils.json_out import dumps
    from utils.render import json_safe

    print(json_safe(dumps(value, ensure_ascii=False, indent=2)))
