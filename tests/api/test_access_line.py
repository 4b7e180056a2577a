"""The access-log formatter of ``flowloom serve`` (:class:`api.access_log.AccessLineFormatter`)
writes uvicorn's own line for every record uvicorn's formatter would be given."""

from __future__ import annotations

import logging
import logging.config

import pytest
from uvicorn.logging import AccessFormatter

from api.access_log import ACCESS_FORMAT, AccessLineFormatter
from api.logs import uvicorn_log_config

ARGS = [
    ("127.0.0.1:5555", "POST", "/v1/workflows/plumbing/runs", "1.1", 200),
    ("[::1]:80", "GET", "/v1/runs/r1/events?after=3&api_key=***", "1.0", 404),
    ("unix", "DELETE", "/é ✓", "2", 599),  # no phrase for 599
    ("1.2.3.4:1", "PUT", "/", "1.1", 100),
    ("1.2.3.4:1", "PATCH", "/x", "1.1", 503),
]


def _record(args: tuple, level: int = logging.INFO, msg: str = '%s - "%s %s HTTP/%s" %d') -> logging.LogRecord:
    return logging.LogRecord("uvicorn.access", level, __file__, 1, msg, args, None)


@pytest.mark.parametrize("use_colors", [False, True, None])
@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING, logging.CRITICAL, 5])
def test_the_line_is_uvicorns(use_colors, level):
    ours, theirs = AccessLineFormatter(ACCESS_FORMAT, use_colors=use_colors), AccessFormatter(
        ACCESS_FORMAT, use_colors=use_colors)
    for args in ARGS:
        for _ in range(2):  # the second time from the remembered status
            assert ours.format(_record(args, level)) == theirs.format(_record(args, level))


def test_another_format_or_other_arguments_go_uvicorns_way():
    fmt = "%(asctime)s %(levelprefix)s %(request_line)s %(status_code)s"
    ours, theirs = AccessLineFormatter(fmt, use_colors=False), AccessFormatter(fmt, use_colors=False)
    record = _record(ARGS[0])
    record.created = 0.0
    assert ours.format(record) == theirs.format(record)
    with pytest.raises(ValueError):  # uvicorn's formatter refuses what is not its five arguments
        AccessLineFormatter(ACCESS_FORMAT, use_colors=False).format(_record(("a", "b", "c", "d"), msg="%s %s %s %s"))


def test_serve_logs_access_lines_with_it_unless_json():
    plain = uvicorn_log_config()
    assert plain["formatters"]["access"]["()"] is AccessLineFormatter
    logging.config.dictConfig(plain)
    handler = logging.getLogger("uvicorn.access").handlers[0]
    assert isinstance(handler.formatter, AccessLineFormatter)
    assert all(h["formatter"] == "json" for h in uvicorn_log_config(json_format=True)["handlers"].values())
