"""Server TLS contexts that follow their certificate files (cert-manager renews them in place).

A mounted Secret is updated by the kubelet swapping a symlink (``..data``) to a new directory,
so ``stat`` of the file paths sees a new inode and mtime at once (kubernetes.io/docs/concepts/
configuration/secret, "Mounted Secrets are updated automatically"). :meth:`CertReloader.context`
is called for every new connection: it stats both files (two system calls) and, when either
changed, loads a new :class:`ssl.SSLContext`; connections already open keep the old one. A pair
that fails to load (a certificate renewed before its key) keeps the old context until the
files agree.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from pathlib import Path

from shmguard.fleet.logline import log_json

_Stamp = tuple[tuple[int, int, int], ...]


class CertError(Exception):
    """The certificate or key cannot be read or do not form a pair; the message names the
    file."""


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or later) for ``cert`` (PEM chain) and ``key``.

    Raises:
        CertError: a file is missing or unreadable, or the key does not match.
    """
    for p in (cert, key):
        if not p.is_file():
            raise CertError(f"{p}: no such file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as err:
        raise CertError(_load_error(cert, key, err)) from None
    return ctx


#: Bytes of each file read to say what it holds (a chain of a few certificates is ~5 KiB).
_SNIFF = 1 << 20


def _holds(path: Path) -> tuple[bool, bool]:
    """(has a PEM certificate, has a PEM private key) among the first bytes of ``path``."""
    try:
        with path.open("rb") as f:
            head = f.read(_SNIFF)
    except OSError:
        return False, False
    return b"-----BEGIN CERTIFICATE-----" in head, b"PRIVATE KEY-----" in head


def _load_error(cert: Path, key: Path, err: Exception) -> str:
    """One line for a pair OpenSSL refused, naming the files and what is wrong with them
    (OpenSSL's own text, ``[SSL] PEM lib (_ssl.c:3905)``, names neither)."""
    cert_has_cert, cert_has_key = _holds(cert)
    key_has_cert, key_has_key = _holds(key)
    if not cert_has_cert and cert_has_key and key_has_cert:
        return f"{cert} holds a private key and {key} a certificate: swap the two files"
    if not cert_has_cert:
        return f"{cert}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
    if not key_has_key:
        return f"{key}: no PEM private key (-----BEGIN ... PRIVATE KEY-----) in it"
    reason = getattr(err, "reason", None) or err
    return f"{cert} / {key}: the key does not match the certificate or does not load ({reason})"


class CertReloader:
    """The current server context for a certificate and key pair.

    Raises:
        CertError: when the first load fails.
    """

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = Path(cert), Path(key)
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._ctx = server_context(self.cert, self.key)
        #: How many times a changed pair was loaded.
        self.reloads = 0

    def _stat(self) -> _Stamp:
        out = []
        for p in (self.cert, self.key):
            try:
                st = os.stat(p)
            except OSError:
                out.append((0, 0, 0))
            else:
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(out)

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: reloaded first when a file changed."""
        stamp = self._stat()
        if stamp == self._stamp:
            return self._ctx
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._ctx = server_context(self.cert, self.key)
                except CertError as err:
                    log_json(
                        logging.WARNING,
                        action="cert-reload",
                        reason="failed",
                        message=f"{err}; keeping the old certificate",
                    )
                else:
                    self.reloads += 1
                    log_json(logging.INFO, action="cert-reload", cert=str(self.cert))
                self._stamp = stamp
            return self._ctx
