"""The access-log formatter of ``flowloom serve`` (:func:`api.logs.uvicorn_log_config`).

A module of its own because it subclasses uvicorn's formatter: :mod:`api.logs` is imported
by every command (``flowloom run`` too), and only a server should import uvicorn.
"""

from __future__ import annotations

import logging
from typing import Any

from uvicorn.logging import AccessFormatter

__all__ = ["ACCESS_FORMAT", "AccessLineFormatter"]

#: the line of uvicorn's access log (``uvicorn.config.LOGGING_CONFIG``)
ACCESS_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'


class AccessLineFormatter(AccessFormatter):
    """uvicorn's access-log formatter writing the same plain line without copying the
    record: uvicorn's ``formatMessage`` and its base's each take a ``copy.copy`` of the
    record to add three fields to it, and look the status phrase up in ``HTTPStatus`` -
    about half of what a request's access-log line cost the server. With colours, another
    format, or arguments that are not uvicorn's five, uvicorn's own way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._statuses: dict[int, str] = {}  # status code -> "200 OK", as get_status_code writes it

    def formatMessage(self, record: logging.LogRecord) -> str:
        args = record.args
        if self.use_colors or self._fmt != ACCESS_FORMAT or not (isinstance(args, tuple) and len(args) == 5):
            return super().formatMessage(record)
        client_addr, method, full_path, http_version, code = args
        code = int(code)  # type: ignore[call-overload]  # uvicorn's status code, as its formatter reads it
        status = self._statuses.get(code)
        if status is None:
            status = self._statuses[code] = self.get_status_code(code)
        prefix = record.levelname + ":" + " " * (8 - len(record.levelname))
        return f'{prefix!s} {client_addr!s} - "{method} {full_path} HTTP/{http_version}" {status!s}'
