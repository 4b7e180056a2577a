"""Credentials out of the logs of the HTTP clients Flowloom drives.

The HTTP node and the model SDKs send requests with ``httpx``, which logs every request
line at INFO with its full URL (``HTTP Request: GET https://api.example/v1?api_key=...``).
A URL is where a workflow author puts a key when the service wants one in the query, so
that line would carry the key into every log an operator keeps. Flowloom's own records
already leave secrets out (the HTTP node stores URLs without their query and header
names without values; API keys are never logged); this is the one remaining boundary,
closed once by a filter on those libraries' loggers: a query parameter whose name says
credential (``api_key``, ``key``, ``token``, ``access_token``, ``secret``, ``password``,
``signature``, ...) keeps its name and loses its value, and so does the password of a
``user:password@`` part.

:func:`install` is idempotent; :func:`api.composition.open_service` calls it, so the CLI,
the API server and the queue workers all get it.
"""

from __future__ import annotations

import logging
import re

__all__ = ["LOGGERS", "RedactingFilter", "install", "redact"]

#: the loggers of the HTTP client libraries (their requests' URLs)
LOGGERS = ("httpx", "httpcore", "openai")

_NAMES = (
    r"api[_-]?key|apikey|key|token|access[_-]?token|refresh[_-]?token|id[_-]?token|auth|authorization|"
    r"secret|client[_-]?secret|password|passwd|pwd|sig|signature|x-amz-signature|session|sessionid|code"
)
_QUERY = re.compile(rf"(?i)([?&;](?:{_NAMES})=)[^&#\s\"'<>]*")
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@")
MASK = "***"


def redact(text: str) -> str:
    """``text`` with the values of credential query parameters and URL passwords masked."""
    return _USERINFO.sub(rf"\g<1>{MASK}@", _QUERY.sub(rf"\g<1>{MASK}", text))


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in a record's message (:func:`redact`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


_FILTER = RedactingFilter()


def install() -> None:
    """Put the filter on the HTTP client libraries' loggers (once)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
