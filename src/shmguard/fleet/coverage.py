"""Which pods the shmguard webhook sizes, told from objects: :mod:`shmguard.lint.coverage`'s
values under the names the fleet documents (docs/api.md). They live in ``lint/`` because
``check`` runs the coverage step over files as well as a cluster's objects.
"""

from __future__ import annotations

from shmguard.lint.coverage import (
    SKIPPED_NAMESPACES,
    WebhookView,
    selector_matches,
    view_from_objects,
)

__all__ = ["SKIPPED_NAMESPACES", "WebhookView", "selector_matches", "view_from_objects"]
