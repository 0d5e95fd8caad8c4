"""Helpers for the webhook tests and benchmarks/webhook_load.py: a throwaway CA and server
certificate (the ``cryptography`` package), AdmissionReview requests, and an HTTPS client
that trusts the CA."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shmguard.sources.discover import discover
from shmguard.sources.k8s_model import text
from shmguard.sources.load import load_path

#: ../shared/corpus, next to the repository (absent on some machines: callers skip).
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


@dataclass
class Pki:
    """A CA and a way to issue server certificates for 127.0.0.1 / localhost."""

    dir: Path
    ca_key: ec.EllipticCurvePrivateKey
    ca_cert: x509.Certificate

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.crt"

    def issue(self, name: str, common_name: str = "shmguard-webhook") -> tuple[Path, Path]:
        """Write ``<name>.crt`` and ``<name>.key`` (a new key each time); return their paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
            .sign(self.ca_key, hashes.SHA256())
        )
        crt, k = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        k.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return crt, k


def make_pki(directory: Path) -> Pki:
    """A self-signed CA in ``directory`` (``ca.crt``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shmguard test CA")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pki = Pki(directory, key, cert)
    pki.ca_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pki


def client_context(ca_file: Path) -> ssl.SSLContext:
    """A client context that trusts only ``ca_file`` and checks the host name."""
    return ssl.create_default_context(cafile=str(ca_file))


def review(obj: dict[str, Any], namespace: str = "ml", operation: str = "CREATE") -> dict[str, Any]:
    """An AdmissionReview v1 request about Pod ``obj``, as the API server sends it."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": meta.get("name", "") if isinstance(meta := obj.get("metadata"), dict) else "",
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def post(
    conn: http.client.HTTPSConnection, body: bytes, path: str = "/mutate?timeout=3s"
) -> tuple[int, dict[str, Any] | bytes]:
    """POST ``body``; the status and the parsed JSON (raw bytes when not JSON)."""
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data


def start_webhook(cert: Path, key: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """Start ``python -m shmguard webhook`` on a free loopback port with ``cert``/``key``
    (stderr a text pipe); return the process and the port from its first log line."""
    argv = ["webhook", "--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shmguard", *argv, *extra], stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if '"action":"start","url":"https://127.0.0.1:' not in line:
        proc.kill()
        raise RuntimeError(f"the webhook did not start: {line}{proc.stderr.read()}")
    return proc, int(line.split("127.0.0.1:")[1].split("/")[0])


def at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        name, _, idx = part.partition("[")
        if name:
            obj = obj[name]
        if idx:
            obj = obj[int(idx.rstrip("]"))]
    return obj


def corpus_pods() -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, Pod) for every pod template the k8s source finds in the corpus: the template's
    spec with its object's and template's labels and annotations (as ``check`` merges them)."""
    for f in discover([str(CORPUS / "k8s")]):
        lf = load_path(f)
        if not lf.pod_specs:
            continue
        try:
            docs = list(yaml.safe_load_all(Path(f).read_text()))
        except yaml.YAMLError:
            continue
        for i, ps in enumerate(lf.pod_specs):
            doc = docs[ps.obj.doc]
            spec = at(doc, ps.path)
            meta: dict[str, Any] = {"name": f"p{i}"}
            for key, src in (("labels", ps.labels), ("annotations", ps.annotations)):
                vals = {k: v for k, n in src.items() if isinstance(v := text(n), str)}
                if vals:
                    meta[key] = vals
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
            # dates and other YAML-only values become strings, as kubectl would send them
            yield f"{f}:{ps.path}", json.loads(json.dumps(pod, default=str))
