"""A password in a --store URI is never printed, whatever is wrong with the URI."""
from __future__ import annotations

import pytest

from tests.conftest import TEST_PAPER, run_cli
from utils.secrets import redact_secrets, redact_uri

MALFORMED = [
    "seekdb://root:SECRETPW@127.0.0.1:99999/db",  # port out of range
    "seekdb://root:SECRETPW@127.0.0.1:abc/db",  # non-numeric port
    "seekdb://root:SECRETPW@/db",  # no host
    "seekdb://root:SECRETPW@127.0.0.1:2881/",  # no database
    "seekdb://:SECRETPW@127.0.0.1:2881/db",  # empty user
    "seekdb://root:SECRETPW@127.0.0.1:2881/d'b",  # a quote in the database name
    "seekdb://root:SE'CRETPW@127.0.0.1:2881/db",  # a quote in the password
    "seekdb://root:SECRET/PW@127.0.0.1:2881/db",  # a slash in the password
    "seekdb://root:SECRETPW",  # no host at all
    "seekdb://root:SECRETPW@127.0.0.1:2881/db#frag",
    "seekdb://root:SECRETPW@127.0.0.1:2881/db?tenant=a;b",
]


@pytest.mark.parametrize("uri", MALFORMED)
def test_malformed_store_uri_error_never_shows_the_password(tmp_path, uri: str) -> None:
    proc = run_cli("index", "--input", str(TEST_PAPER), "--output", str(tmp_path / "idx"), "--mock", "--quiet",
                   "--store", uri)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    for part in ("SECRETPW", "CRETPW", "SECRET", "PW@"):
        assert part not in proc.stderr + proc.stdout, proc.stderr


@pytest.mark.parametrize("uri", MALFORMED)
def test_redact_uri_hides_every_password(uri: str) -> None:
    assert "SECRET" not in redact_uri(uri) and "PW" not in redact_uri(uri).replace("PW@", "")


def test_redaction_keeps_what_is_not_secret() -> None:
    assert redact_uri("seekdb:///abs/path") == "seekdb:///abs/path"
    assert redact_uri("seekdb://root@h:2881/db") == "seekdb://root@h:2881/db"
    assert redact_secrets("use seekdb://USER[:PASS]@HOST:PORT/DATABASE") == "use seekdb://USER[:PASS]@HOST:PORT/DATABASE"
    assert redact_secrets("at 'seekdb://u:pw@h:1/d': bad") == "at 'seekdb://u:***@h:1/d': bad"
