"""The secret box: tokens that hide the value, key rotation, a key file made once and
private, and a clear error when the key changed."""

from __future__ import annotations

import stat

import pytest
from cryptography.fernet import Fernet

from engine.settings import Settings
from workers.secret_box import KEY_FILE, SecretBox, SecretUnreadable, mask, secret_box_for


def test_encrypt_round_trips_and_hides_the_value():
    box = SecretBox([Fernet.generate_key()])
    token = box.encrypt("sk-very-secret-value-1234")
    assert "very-secret" not in token and box.decrypt(token) == "sk-very-secret-value-1234"
    assert box.encrypt("same") != box.encrypt("same")  # a new IV every time
    assert "very" not in repr(box)


def test_rotation_decrypts_with_an_older_key():
    old, new = Fernet.generate_key(), Fernet.generate_key()
    token = SecretBox([old]).encrypt("value")
    assert SecretBox([new, old]).decrypt(token) == "value"
    with pytest.raises(SecretUnreadable, match="encryption key changed"):
        SecretBox([new]).decrypt(token)


def test_altered_token_is_unreadable():
    box = SecretBox([Fernet.generate_key()])
    token = box.encrypt("value")
    with pytest.raises(SecretUnreadable):
        box.decrypt(token[:-4] + "AAAA")


def test_malformed_key_is_named():
    with pytest.raises(ValueError, match="FLOWLOOM_ENCRYPTION_KEY"):
        SecretBox([b"not-a-key"])


def test_key_file_is_created_once_and_private(tmp_path):
    settings = Settings(home=tmp_path / "home")
    token = secret_box_for(settings).encrypt("v")
    path = tmp_path / "home" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = path.read_bytes()
    assert secret_box_for(Settings(home=tmp_path / "home")).decrypt(token) == "v"
    assert path.read_bytes() == before


def test_environment_key_wins_over_the_file(tmp_path, monkeypatch):
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("FLOWLOOM_ENCRYPTION_KEY", key)
    settings = Settings(home=tmp_path / "home")
    token = secret_box_for(settings).encrypt("v")
    assert not (tmp_path / "home" / KEY_FILE).exists()
    assert SecretBox([key.encode()]).decrypt(token) == "v"


def test_mask_shows_little():
    assert mask("sk-abcdefghijklmnop1234") == "sk-…1234"
    assert mask("short-key") == "****"
    assert mask("") == "" and mask(None) == ""
