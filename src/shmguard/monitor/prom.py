"""A small reader of Prometheus's HTTP API: instant queries and Prometheus's duration syntax.

Only what ``shmguard recommend`` needs, over the standard library (no client dependency):
``GET <base>/api/v1/query?query=EXPR&time=T`` answers
``{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {...},
"value": [<unix seconds>, "<number as text>"]}, ...]}}``, or ``{"status": "error",
"errorType": ..., "error": ...}`` with an HTTP 4xx/5xx status
(https://prometheus.io/docs/prometheus/latest/querying/api/, "Format overview" and
"Instant queries"). Durations are Prometheus's ``[0-9]+(ms|s|m|h|d|w|y)`` units written
largest first, ``1h30m`` (https://prometheus.io/docs/prometheus/latest/querying/basics/,
"Time durations"; a day is 24 h, a week 7 d, a year 365 d).
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

#: Seconds per unit of Prometheus's duration syntax.
UNITS = {"y": 365 * 86400.0, "w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0}
_DURATION = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?"
)
_SCALES = (UNITS["y"], UNITS["w"], UNITS["d"], UNITS["h"], UNITS["m"], 1.0, 0.001)


class PromError(Exception):
    """A query could not be answered: the server is unreachable, answers an error, or is not
    a Prometheus API. The message is one line naming the URL."""


class PromQueryError(PromError):
    """Prometheus answered a query with an error (``status: error``: bad PromQL, a timeout,
    too many samples), as opposed to not being reachable or not being Prometheus."""


def parse_prom_duration(text: str) -> float:
    """``7d``, ``1h30m``, ``90s``, ``500ms`` -> seconds (> 0), as Prometheus parses a range.

    Raises:
        ValueError: empty, zero, units out of order, or anything else Prometheus would refuse.
    """
    raw = text.strip()
    m = _DURATION.fullmatch(raw)
    if not raw or m is None:
        raise ValueError(
            f"invalid duration {text!r}: expected Prometheus's form, numbers with units "
            "y, w, d, h, m, s, ms from largest to smallest (7d, 1h30m, 90s)"
        )
    seconds = sum(int(g) * scale for g, scale in zip(m.groups(), _SCALES, strict=True) if g)
    if seconds <= 0:
        raise ValueError(f"invalid duration {text!r}: must be greater than 0")
    return seconds


def prom_duration(seconds: float) -> str:
    """Seconds as a PromQL range (whole seconds, at least 1 s): 604800 -> ``604800s``."""
    return f"{max(1, math.ceil(seconds))}s"


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector: its labels and value (``NaN``/``Inf`` as floats)."""

    labels: Mapping[str, str]
    value: float


def parse_vector(body: Any, where: str) -> list[Sample]:
    """The samples of a decoded ``/api/v1/query`` answer.

    Raises:
        PromError: the answer is an error or not a Prometheus instant vector.
    """
    if not isinstance(body, dict) or "status" not in body:
        raise PromError(f"{where}: not a Prometheus API answer (no status field)")
    if body["status"] != "success":
        raise PromQueryError(
            f"{where}: Prometheus answered {body.get('errorType')}: {body.get('error')}"
        )
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PromError(f"{where}: not an instant vector answer")
    out = []
    for item in data.get("result") or ():
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            out.append(Sample(labels, float(item["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise PromError(f"{where}: malformed sample {item!r:.80}") from None
    return out


class PromClient:
    """Instant queries against one Prometheus server.

    Args:
        url: the server's base URL (``http://prometheus:9090``, or with the path prefix of
            ``--web.route-prefix``, ``https://host/prometheus/``); ``user:password@`` in it
            is sent as HTTP basic auth (Prometheus's ``--web.config.file``
            ``basic_auth_users``), never printed: :attr:`url` shows ``user:***@``.
        timeout: seconds per request.

    Raises:
        ValueError: ``url`` is not an http(s) URL with a host and a numeric port.
    """

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(url.strip())
        netloc = parts.netloc.rpartition("@")[2]
        login = ""
        if parts.username is not None:
            login = parts.username + (":***" if parts.password is not None else "") + "@"
        shown = urllib.parse.urlunsplit((parts.scheme, login + netloc, parts.path, "", ""))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{shown!r} is not an http:// or https:// URL")
        try:
            _ = parts.port
        except ValueError:
            raise ValueError(f"{shown!r}: the port is not a number from 0 to 65535") from None
        self._auth: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self._auth = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        self._base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        self._base = self._base.rstrip("/")
        #: The base URL as shown in messages and reports (any password replaced by ``***``).
        self.url = shown.rstrip("/")
        self.timeout = timeout

    def query(self, expr: str, at: float) -> list[Sample]:
        """Evaluate ``expr`` at unix time ``at``: the instant vector's samples.

        Raises:
            PromError: unreachable, an HTTP or PromQL error, or not a Prometheus answer.
        """
        params = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        req = urllib.request.Request(f"{self._base}/api/v1/query?{params}")
        if self._auth is not None:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                raw = r.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                body = json.loads(raw)
            except ValueError:
                hint = "not a Prometheus API?"
                if err.code == 401:
                    hint = "give the credentials in the URL: http://user:password@host"
                raise PromError(f"{self.url}: HTTP {err.code} {err.reason} ({hint})") from None
            return parse_vector(body, self.url)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            reason = getattr(err, "reason", err)
            raise PromError(f"{self.url}: cannot reach it: {reason}") from None
        try:
            body = json.loads(raw)
        except ValueError:
            raise PromError(f"{self.url}: not a Prometheus API answer (not JSON)") from None
        return parse_vector(body, self.url)
