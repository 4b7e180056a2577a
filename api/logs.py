"""The server's own logs: no secret in an access-log line, no error lost to a full disk.

- :class:`SecretMask` is a :class:`logging.Filter` for uvicorn's access log: a key sent
  in the query string (``?api_key=``, ``?key=``, ``?token=``, ``?access_token=``...) is
  refused with 401, but uvicorn would still write the whole request line, secret
  included. The filter replaces such values, and anything shaped like a Flowloom key
  anywhere in the path, with ``***`` before the line is formatted.
  :func:`uvicorn_log_config` is uvicorn's default logging configuration with it.
- :class:`FallbackFileHandler` writes log records to a file and, when the file cannot be
  written (a full disk: ``ENOSPC``, a read-only or removed directory), to stderr instead,
  saying once why: the traceback of a store failure on a full disk is exactly the record
  the file can no longer hold.
"""

from __future__ import annotations

import copy
import logging
import re
import sys
from typing import Any
from urllib.parse import unquote_plus

__all__ = ["SECRET_PARAMETERS", "FallbackFileHandler", "SecretMask", "mask_secrets", "uvicorn_log_config"]

#: query parameters whose value is a secret, compared case-insensitively after URL-decoding
SECRET_PARAMETERS = frozenset({"api_key", "apikey", "api-key", "key", "token", "access_token", "auth",
                               "authorization", "password", "secret", "client_secret"})
MASK = "***"

_PAIR = re.compile(r"([^&=;]*)=([^&;]*)")
#: a Flowloom key (``fl_<prefix>_<secret>``), also URL-encoded, wherever it appears
_KEY = re.compile(r"fl_[a-z0-9]{8}_[A-Za-z0-9_-]{8,}")


def mask_secrets(target: str) -> str:
    """``target`` (a request's path and query, as in an access-log line) with the values
    of :data:`SECRET_PARAMETERS` and every Flowloom key replaced by ``***``."""
    path, question, query = target.partition("?")
    if question:
        query = _PAIR.sub(lambda m: f"{m.group(1)}={MASK}" if unquote_plus(m.group(1)).strip().lower()
                          in SECRET_PARAMETERS else m.group(0), query)
    return _KEY.sub(MASK, path + question + query)


class SecretMask(logging.Filter):
    """Masks the request target of uvicorn's access-log records (module docstring).

    uvicorn logs ``(client_addr, method, full_path, http_version, status_code)`` as the
    record's ``args``; the path is the third."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], mask_secrets(args[2]), *args[3:])
        elif isinstance(record.msg, str):
            record.msg = mask_secrets(record.msg)
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`SecretMask` on its access log."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["secret_mask"] = {"()": SecretMask}
    config["handlers"]["access"].setdefault("filters", []).append("secret_mask")
    return config


class FallbackFileHandler(logging.FileHandler):
    """A :class:`logging.FileHandler` (opened on the first record) that writes a record
    it cannot write to the file to stderr instead, with one line saying why on the first
    failure (and again once the file works and fails anew)."""

    def __init__(self, filename: str, encoding: str = "utf-8") -> None:
        super().__init__(filename, delay=True, encoding=encoding)
        self._failing = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.stream is None:
                self.stream = self._open()
            self.stream.write(self.format(record) + self.terminator)
            self.stream.flush()
            self._failing = False
        except OSError as exc:
            self._fall_back(record, exc)
        except Exception:  # noqa: BLE001 - a formatting problem: logging's own report
            self.handleError(record)

    def _fall_back(self, record: logging.LogRecord, exc: OSError) -> None:
        stream = sys.stderr
        try:
            if not self._failing:
                stream.write(f"flowloom: cannot write the log file {self.baseFilename} "
                             f"({exc.strerror or exc}); log records go to stderr\n")
                self._failing = True
            stream.write(self.format(record) + self.terminator)
            stream.flush()
        except Exception:  # noqa: BLE001 - stderr gone too: nothing left to tell
            pass
        self._drop_stream()

    def _drop_stream(self) -> None:
        """Close the failed file (its buffer holds the unwritten record) so the next
        record opens it afresh: a disk with room again gets records again."""
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
