"""The server's own logs: no secret in an access-log line, no error lost to a full disk,
JSON records joined to their run on request.

- :class:`SecretMask` is a :class:`logging.Filter` for uvicorn's access log: a key sent
  in the query string (``?api_key=``, ``?key=``, ``?token=``, ``?access_token=``...) is
  refused with 401, but uvicorn would still write the whole request line, secret
  included. The filter replaces such values, and anything shaped like a Flowloom key
  anywhere in the path, with ``***`` before the line is formatted.
  :func:`uvicorn_log_config` is uvicorn's default logging configuration with it, and
  with :class:`api.access_log.AccessLineFormatter` writing its plain lines.
- :class:`FallbackFileHandler` writes log records to a file and, when the file cannot be
  written (a full disk: ``ENOSPC``, a read-only or removed directory), to stderr instead,
  saying once why: the traceback of a store failure on a full disk is exactly the record
  the file can no longer hold.
- ``FLOWLOOM_LOG_FORMAT=json``: one JSON object per record (:func:`json_formatter`),
  each carrying the tenant, run and node it was written for (:class:`RunFields`).
"""

from __future__ import annotations

import copy
import logging
import os
import re
import sys
from typing import Any
from urllib.parse import unquote_plus

from engine.telemetry import run_scope

__all__ = [
    "JSON_FIELDS",
    "SECRET_PARAMETERS",
    "FallbackFileHandler",
    "RunFields",
    "SecretMask",
    "json_formatter",
    "mask_secrets",
    "uvicorn_log_config",
]

#: the fields of a JSON log record, in order (``time``, ``level`` and ``logger`` renamed from logging's own)
JSON_FIELDS = (
    "%(asctime)s %(levelname)s %(name)s %(message)s %(tenant_id)s %(run_id)s %(node_id)s "
    "%(trace_id)s %(span_id)s"
)
_RENAMED = {"asctime": "time", "levelname": "level", "name": "logger"}

#: query parameters whose value is a secret, compared case-insensitively after URL-decoding
SECRET_PARAMETERS = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "key",
        "token",
        "access_token",
        "auth",
        "authorization",
        "password",
        "secret",
        "client_secret",
    }
)
MASK = "***"

_PAIR = re.compile(r"([^&=;]*)=([^&;]*)")
#: a Flowloom key (``fl_<prefix>_<secret>``), also URL-encoded, wherever it appears
_KEY = re.compile(r"fl_[a-z0-9]{8}_[A-Za-z0-9_-]{8,}")


def mask_secrets(target: str) -> str:
    """``target`` (a request's path and query, as in an access-log line) with the values
    of :data:`SECRET_PARAMETERS` and every Flowloom key replaced by ``***``."""
    path, question, query = target.partition("?")
    if question:
        query = _PAIR.sub(
            lambda m: (
                f"{m.group(1)}={MASK}"
                if unquote_plus(m.group(1)).strip().lower() in SECRET_PARAMETERS
                else m.group(0)
            ),
            query,
        )
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


class RunFields(logging.Filter):
    """Puts the run scope of the task that writes a record on it: ``tenant_id``, ``run_id``
    and ``node_id`` (:data:`engine.telemetry.run_scope`; null outside a run, ``node_id``
    null outside a node), so an operator can join a log line to its run and node run; and
    ``trace_id`` / ``span_id`` (hex) of the current span when the process traces (null
    otherwise), to join it to the trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn's copy of the message with terminal colours: escape codes, not data, in a JSON record
        record.__dict__.pop("color_message", None)
        scope = run_scope.get()
        if scope is None:
            record.tenant_id = record.run_id = record.node_id = None
        else:
            record.tenant_id, record.run_id, node_id = scope
            record.node_id = node_id or None
        record.trace_id, record.span_id = _trace_ids()
        return True


def _trace_ids() -> tuple[str | None, str | None]:
    """The current span's ids, without importing OpenTelemetry: a process that never
    loaded it traces nothing."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None, None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None, None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def json_formatter() -> logging.Formatter:
    """One JSON object per record (python-json-logger): :data:`JSON_FIELDS`, plus any
    ``extra`` a record was given."""
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter(JSON_FIELDS, rename_fields=_RENAMED)


def uvicorn_log_config(*, json_format: bool = False) -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`SecretMask` on its access log.

    ``json_format``: every record (uvicorn's, the access log's and Flowloom's own, from
    INFO) is one JSON object on its stream, with the run scope (:class:`RunFields`);
    otherwise uvicorn's plain text, Flowloom's warnings on stderr as they were."""
    from uvicorn.config import LOGGING_CONFIG

    from .access_log import ACCESS_FORMAT, AccessLineFormatter  # uvicorn's: only a server imports it

    config = copy.deepcopy(LOGGING_CONFIG)
    if config["formatters"]["access"].get("fmt") == ACCESS_FORMAT:
        config["formatters"]["access"]["()"] = AccessLineFormatter
    config.setdefault("filters", {})["secret_mask"] = {"()": SecretMask}
    config["handlers"]["access"].setdefault("filters", []).append("secret_mask")
    if json_format:
        config["filters"]["run_fields"] = {"()": RunFields}
        config["formatters"]["json"] = {"()": json_formatter}
        for handler in config["handlers"].values():
            handler["formatter"] = "json"
            handler.setdefault("filters", []).append("run_fields")
        config["loggers"]["flowloom"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


class FallbackFileHandler(logging.FileHandler):
    """A :class:`logging.FileHandler` (opened on the first record) that writes a record
    it cannot write to the file to stderr instead, with one line saying why on the first
    failure (and again once the file works and fails anew)."""

    def __init__(self, filename: str, encoding: str = "utf-8") -> None:
        super().__init__(filename, delay=True, encoding=encoding)
        self._failing = False

    def _open(self) -> Any:
        """The file opened for appending, created mode 0600 like the run store beside it:
        an internal error's record may quote a run's inputs."""
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.stream is None:
                self.stream = self._open()
            self.stream.write(self.format(record) + self.terminator)
            self.stream.flush()
            self._failing = False
        except OSError as exc:
            self._fall_back(record, exc)
        except Exception:
            self.handleError(record)

    def _fall_back(self, record: logging.LogRecord, exc: OSError) -> None:
        stream = sys.stderr
        try:
            if not self._failing:
                stream.write(
                    f"flowloom: cannot write the log file {self.baseFilename} "
                    f"({exc.strerror or exc}); log records go to stderr\n"
                )
                self._failing = True
            stream.write(self.format(record) + self.terminator)
            stream.flush()
        except Exception:
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
