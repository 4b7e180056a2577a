"""Encryption at rest of secret values: a value decrypts only for the tenant, workflow
and name it was sealed for, under the same master key; the key file is private."""

from __future__ import annotations

import pytest

from workers.secret_box import KEY_ENV, SecretBox, SecretUnreadable, master_key


def test_a_value_opens_only_where_it_was_sealed(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    box = SecretBox(lambda: master_key(tmp_path))
    sealed = box.seal("tenant-a", "wf", "TOKEN", "sk-abc-123")
    assert b"sk-abc-123" not in sealed
    assert box.open("tenant-a", "wf", "TOKEN", sealed) == "sk-abc-123"
    for where in (("tenant-b", "wf", "TOKEN"), ("tenant-a", "other", "TOKEN"), ("tenant-a", "wf", "OTHER")):
        with pytest.raises(SecretUnreadable, match="does not decrypt"):
            box.open(*where, sealed)
    assert (tmp_path / "secret.key").stat().st_mode & 0o777 == 0o600
    again = SecretBox(lambda: master_key(tmp_path))
    assert again.open("tenant-a", "wf", "TOKEN", sealed) == "sk-abc-123", "the key file is reused"


def test_the_configured_key_wins_and_another_key_cannot_read(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    sealed = SecretBox(lambda: master_key(tmp_path)).seal("t", "w", "N", "v-secret")
    monkeypatch.setenv(KEY_ENV, "x" * 40)
    configured = SecretBox(lambda: master_key(tmp_path))
    with pytest.raises(SecretUnreadable, match="set it again"):
        configured.open("t", "w", "N", sealed)
    assert configured.open("t", "w", "N", configured.seal("t", "w", "N", "v")) == "v"
    monkeypatch.setenv(KEY_ENV, "short")
    with pytest.raises(ValueError, match="at least 32 characters"):
        master_key(tmp_path)


def test_no_key_file_until_a_secret_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    SecretBox(lambda: master_key(tmp_path / "home"))
    assert not (tmp_path / "home").exists()
