"""A short command's start-up reads the installed packages' entry points once: every
later ``importlib.metadata.entry_points`` call (networkx's backends, then anyone's) gets the
same answer as a fresh read would, and the library's own function is back afterwards."""

from __future__ import annotations

import importlib.metadata as metadata

from api.cli.common import entry_points_read_once


def test_one_read_answers_every_group_as_a_fresh_read_would(monkeypatch):
    reads = []
    original = metadata.entry_points

    def counted(**params):
        reads.append(params)
        return original(**params)

    monkeypatch.setattr(metadata, "entry_points", counted)
    expected = {group: sorted(ep.name for ep in original(group=group))
                for group in ("console_scripts", "pytest11", "networkx.backends")}
    assert expected["console_scripts"], "the environment has console scripts (flowloom among them)"
    with entry_points_read_once(True):
        for _ in range(2):
            for group, names in expected.items():
                assert sorted(ep.name for ep in metadata.entry_points(group=group)) == names
        assert len(list(metadata.entry_points().select(group="console_scripts"))) == len(expected["console_scripts"])
    assert reads == [{}], "one read of everything, then answers from it"
    assert metadata.entry_points is counted, "the function in place before is back"


def test_an_inactive_block_changes_nothing():
    before = metadata.entry_points
    with entry_points_read_once(False):
        assert metadata.entry_points is before
    assert metadata.entry_points is before
