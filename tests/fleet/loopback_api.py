"""A small Kubernetes API server on loopback for ``check --cluster``'s tests: real HTTP and
the API's JSON list protocol (``limit``/``continue`` pages, items of built-in lists without
``apiVersion``/``kind`` as the API server writes them, ``Status`` bodies for 401/404, the
``/apis`` group list), serving objects built from corpus manifests. The client under test is
the real ``kubernetes`` package; nothing of it is replaced."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

TOKEN = "loopback-token"
BUILTIN = {"": "v1", "apps": "apps/v1", "batch": "batch/v1"}


def _plural(group: str, kind: str) -> str:
    """The resource name ``check --cluster`` asks for (its own table), else kind + s."""
    from shmguard.fleet.cluster import KINDS

    known = {(g, k): p for g, _, p, k, _ in KINDS}
    return known.get((group, kind), kind.lower() + "s")


class Cluster:
    """Objects by (group, plural), namespaces (name -> labels) and an optional webhook
    configuration; ``requests`` records every path asked for."""

    def __init__(
        self,
        objects: list[dict[str, Any]],
        namespaces: dict[str, dict[str, str]],
        webhook: dict[str, Any] | None = None,
    ) -> None:
        self.by_resource: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for o in objects:
            group, _, version = o["apiVersion"].rpartition("/")
            key = (group, version, _plural(group, o["kind"]))
            self.by_resource.setdefault(key, []).append(o)
        self.namespaces = namespaces
        self.webhook = webhook
        self.requests: list[str] = []
        #: resource names (plurals) whose lists answer 403, as RBAC would
        self.forbidden: set[str] = set()

    def groups(self) -> list[dict[str, Any]]:
        names = {g for g, _, _ in self.by_resource if g not in BUILTIN}
        names |= {"apps", "batch", "admissionregistration.k8s.io"}
        out = []
        for g in sorted(names):
            versions = sorted({v for gg, v, _ in self.by_resource if gg == g} or {"v1"})
            gv = [{"groupVersion": f"{g}/{v}", "version": v} for v in versions]
            out.append({"name": g, "versions": gv, "preferredVersion": gv[0]})
        return out


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class _Handler(BaseHTTPRequestHandler):
    cluster: Cluster

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        self.cluster.requests.append(url.path)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        body = self._route(url.path.strip("/").split("/"), parse_qs(url.query))
        if body is None:
            self._send(404, _status(404, "NotFound", f"the server could not find {url.path}"))
        else:
            self._send(body.get("code", 200) if body.get("kind") == "Status" else 200, body)

    def _route(self, parts: list[str], query: dict[str, list[str]]) -> dict[str, Any] | None:
        c = self.cluster
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": c.groups()}
        if parts[:2] == ["api", "v1"] and parts[2:3] == ["namespaces"] and len(parts) <= 4:
            spaces = [
                {"metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n, **lb}}}
                for n, lb in sorted(c.namespaces.items())
            ]
            if len(parts) == 3:
                return {"kind": "NamespaceList", "apiVersion": "v1", "items": spaces}
            one = [s for s in spaces if s["metadata"]["name"] == parts[3]]
            return {"kind": "Namespace", "apiVersion": "v1", **one[0]} if one else None
        if (
            parts[:4]
            == ["apis", "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"]
            and len(parts) == 5
        ):
            w = c.webhook
            return w if w is not None and w["metadata"]["name"] == parts[4] else None
        if parts[0] == "apis" and len(parts) == 3:  # a group version's resources
            plurals = sorted({p for g, v, p in c.by_resource if (g, v) == (parts[1], parts[2])})
            if not plurals:
                return None
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{parts[1]}/{parts[2]}",
                "resources": [
                    {"name": p, "namespaced": True, "kind": p, "verbs": ["get", "list"]}
                    for p in plurals
                ],
            }
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        ns = None
        if len(rest) == 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        key = (group, version, rest[0]) if len(rest) == 1 else None
        if key is not None and rest[0] in c.forbidden:
            return _status(403, "Forbidden", f"cannot list resource {rest[0]!r}")
        if key is None or (key not in c.by_resource and group not in BUILTIN):
            return None  # a custom resource not installed
        items = [
            o
            for o in c.by_resource.get(key, [])
            if ns is None or o["metadata"].get("namespace") == ns
        ]
        return self._page(group, version, items, query)

    def _page(
        self, group: str, version: str, items: list[dict[str, Any]], query: dict[str, list[str]]
    ) -> dict[str, Any]:
        start = int(query.get("continue", ["0"])[0] or 0)
        limit = int(query.get("limit", [str(len(items) or 1)])[0])
        chunk = items[start : start + limit]
        if group in BUILTIN:  # the API server leaves these out of built-in lists' items
            chunk = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in chunk]
        meta: dict[str, Any] = {"resourceVersion": "4242"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        kind = (items[0]["kind"] if items else "Object") + "List"
        api = f"{group}/{version}" if group else version
        return {"kind": kind, "apiVersion": api, "metadata": meta, "items": chunk}


@contextmanager
def serve(
    cluster: Cluster, tmp: Path, context: str = "loopback", namespace: str = "ml"
) -> Iterator[Path]:
    """Serve ``cluster`` on 127.0.0.1 and yield a kubeconfig file for it (token auth, the
    context ``context`` with default namespace ``namespace``)."""
    handler = type("H", (_Handler,), {"cluster": cluster})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    conf = tmp / "kubeconfig"
    conf.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "loop", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [
                    {
                        "name": context,
                        "context": {"cluster": "loop", "user": "u", "namespace": namespace},
                    },
                    {"name": "bad-user", "context": {"cluster": "loop", "user": "nobody"}},
                ],
                "current-context": context,
            }
        )
    )
    try:
        yield conf
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
