"""TLS material for the HTTP/2 front door: a throwaway CA and a server certificate (trustme).

The official bidi client only sends events over ``https`` with ALPN ``h2`` (over plain ``http`` the
CRT transport falls back to HTTP/1.1 and sends nothing; REFERENCE §1), so the simulator needs a
certificate the client trusts. The CA certificate is written to a file for ``SSL_CERT_FILE``; the
CRT's TLS context reads that variable when the client's transport is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["TlsFiles", "make_tls_files"]

#: Names the server certificate is valid for: the simulator binds 127.0.0.1 only.
SERVER_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class TlsFiles:
    """Paths of the written PEM files.

    Attributes:
        ca_cert: the CA certificate; point ``SSL_CERT_FILE`` (CRT, httpx, ssl) at it.
        server_chain: the server certificate followed by its chain (the TLS ``certfile``).
        server_key: the server's private key (the TLS ``keyfile``).
    """

    ca_cert: Path
    server_chain: Path
    server_key: Path


def make_tls_files(directory: Path) -> TlsFiles:
    """Create a fresh CA and a server certificate for :data:`SERVER_NAMES` in ``directory``.

    The files are valid for trustme's default lifetime; the key never leaves ``directory``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="SageMaker simulator (local)")
    cert = ca.issue_cert(*SERVER_NAMES)
    files = TlsFiles(directory / "ca.pem", directory / "server-chain.pem", directory / "server-key.pem")
    ca.cert_pem.write_to_path(str(files.ca_cert))
    cert.private_key_pem.write_to_path(str(files.server_key))
    with files.server_chain.open("wb") as out:
        for blob in cert.cert_chain_pems:
            out.write(blob.bytes())
    files.server_key.chmod(0o600)
    return files
