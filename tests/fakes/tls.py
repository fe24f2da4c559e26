"""HTTPS for the fakes: a CA made for the test run (trustme) and a certificate for 127.0.0.1
and localhost, written to files once per process.

A fake serves with ``serve_in_thread(app, tls=server_certificate())``; a client trusts it
through ``ca_file()``: the bot through the SSL_CERT_FILE / REQUESTS_CA_BUNDLE settings
(``tls_settings()``), given to the settings or to a ``bot`` process's environment, never set
in this process's ``os.environ`` (other tests would see it).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class ServerCertificate:
    cert_file: Path
    key_file: Path
    ca_file: Path


@functools.cache
def server_certificate() -> ServerCertificate:
    """The test run's CA and a server certificate it signed, as PEM files."""
    folder = Path(tempfile.mkdtemp(prefix="fake-tls-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    certificate = ServerCertificate(folder / "server.pem", folder / "server.key", folder / "ca.pem")
    issued.cert_chain_pems[0].write_to_path(str(certificate.cert_file))
    for more in issued.cert_chain_pems[1:]:
        more.write_to_path(str(certificate.cert_file), append=True)
    issued.private_key_pem.write_to_path(str(certificate.key_file))
    ca.cert_pem.write_to_path(str(certificate.ca_file))
    return certificate


def ca_file() -> Path:
    return server_certificate().ca_file


def tls_settings() -> dict[str, str]:
    """The settings that make the bot's CRM clients trust the fakes (and only them): both
    variables, since the machine's environment may hold either."""
    return {"SSL_CERT_FILE": str(ca_file()), "REQUESTS_CA_BUNDLE": str(ca_file())}
