"""Where an engine-backed index lives: ``seekdb:///abs/dir`` (embedded) or ``seekdb://USER[:PASS]@HOST:PORT/DB``, never showing a password."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

from indexing.seekdb.sql import NAME, TABLE_PREFIX
from utils.errors import IndexFormatError, InputError
from utils.secrets import redact_uri


SCHEME = "seekdb"
EMBEDDED_DATABASE = "treerag"

PASSWORD_ENV = "TREERAG_SEEKDB_PASSWORD"


@dataclass(frozen=True)
class StoreURI:
    """Where the engine is: an embedded database directory, or a server."""

    path: str | None = None
    host: str | None = None
    port: int = 2881
    user: str = "root"
    database: str = EMBEDDED_DATABASE
    tenant: str = "sys"
    password: str = field(default="", repr=False, compare=False)

    @property
    def embedded(self) -> bool:
        return self.path is not None

    def public(self) -> str:
        """The URI as written to metadata.json and shown to people: never the password."""
        if self.embedded:
            return f"{SCHEME}://{self.path}"
        tenant = f"?tenant={self.tenant}" if self.tenant != "sys" else ""
        return f"{SCHEME}://{self.user}@{self.host}:{self.port}/{self.database}{tenant}"


def is_store_uri(text: str) -> bool:
    return text.startswith(f"{SCHEME}:")


def parse_store_uri(text: str, env: Mapping[str, str] | None = None) -> StoreURI:
    """``seekdb:///abs/path`` or ``seekdb://USER[:PASS]@HOST:PORT/DATABASE[?tenant=T]``; one-line errors
    that never show the password."""
    env = os.environ if env is None else env
    bad = (f"--store {redact_uri(text)!r}: expected seekdb:///absolute/path (embedded) or "
           "seekdb://USER[:PASS]@HOST:PORT/DATABASE (server)")
    if not is_store_uri(text):
        raise InputError(bad)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise InputError(bad) from None
    if parts.scheme != SCHEME or parts.fragment:
        raise InputError(bad)
    if not parts.netloc:
        path = unquote(parts.path)
        if not path.startswith("/") or path == "/" or parts.query:
            raise InputError(bad)
        return StoreURI(path=os.path.normpath(path))
    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not parts.username or not NAME.fullmatch(database or ""):
        raise InputError(bad)
    tenant = "sys"
    if parts.query:
        m = re.fullmatch(r"tenant=([A-Za-z0-9_]+)", parts.query)
        if not m:
            raise InputError(bad)
        tenant = m.group(1)
    password = unquote(parts.password) if parts.password is not None else env.get(PASSWORD_ENV, "")
    return StoreURI(host=parts.hostname, port=port or 2881, user=unquote(parts.username), database=database,
                    tenant=tenant, password=password)


def store_uri_of(meta: Mapping[str, Any], env: Mapping[str, str] | None = None) -> StoreURI:
    """The engine an index's metadata names, with the password from the environment."""
    store = meta.get("store")
    if not isinstance(store, dict) or not isinstance(store.get("uri"), str) \
            or not TABLE_PREFIX.fullmatch(str(store.get("prefix", ""))):
        raise IndexFormatError("metadata.json: store must name a seekdb URI and a table prefix")
    return parse_store_uri(store["uri"], env)
