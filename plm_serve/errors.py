"""What the service refuses, as exceptions: plm_serve/http_errors.py answers each with its
HTTP status."""

from __future__ import annotations

from plm_core.errors import PlmUserError


class NotReady(PlmUserError):
    """The index is empty or not loaded yet (HTTP 503)."""


class FromFile(PlmUserError):
    """A posted record has the id of a document that a file holds (HTTP 409)."""
