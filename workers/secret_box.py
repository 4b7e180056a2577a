"""Secrets encrypted at rest: what the stores keep of a provider key or a workflow secret.

A value is stored as a Fernet token (AES-128-CBC with an HMAC-SHA256, from the
``cryptography`` library): a stolen database without the key gives nothing usable, and a
token altered in the database fails to decrypt instead of decrypting to something else.

Where the key comes from (:func:`secret_box_for`):

1. ``FLOWLOOM_ENCRYPTION_KEY``: one or more Fernet keys (``Fernet.generate_key()``, 44
   URL-safe base64 characters), comma-separated. The first encrypts, every one decrypts,
   so a key is rotated by putting the new one first and keeping the old one until the
   values are written again. Every process sharing a database (several machines on one
   PostgreSQL) needs the same value.
2. else the file ``$FLOWLOOM_HOME/secret.key``, created mode 0600 with a new key on first
   use (a single machine needs no setup; the key lives beside the database it protects,
   so back both up together and keep the home private).

The variable is not called ``FLOWLOOM_SECRET_KEY`` on purpose: ``FLOWLOOM_SECRET_<NAME>``
is what a workflow's ``{{secret:NAME}}`` reads, and a workflow must never read the key.

Nothing here logs, and no repr or error message contains a plaintext or a key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import FlowloomError

__all__ = ["ENCRYPTION_KEY_ENV", "KEY_FILE", "SecretBox", "SecretUnreadable", "mask", "secret_box_for"]

#: Environment variable holding the Fernet key(s), comma-separated, newest first.
ENCRYPTION_KEY_ENV = "FLOWLOOM_ENCRYPTION_KEY"
#: Key file under ``FLOWLOOM_HOME`` used when the variable is unset.
KEY_FILE = "secret.key"


class SecretUnreadable(FlowloomError):
    """A stored secret cannot be decrypted: the encryption key changed (another
    ``FLOWLOOM_ENCRYPTION_KEY``, a lost ``secret.key``) or the stored value was altered.
    The fix is to restore the key or set the secret again."""


class SecretBox:
    """Encrypts and decrypts short texts with one or more Fernet keys (module docstring)."""

    def __init__(self, keys: list[bytes]) -> None:
        """``keys``: Fernet keys, the first encrypts. Raises ValueError: none, or one malformed."""
        from cryptography.fernet import Fernet, MultiFernet

        if not keys:
            raise ValueError("a secret box needs at least one key")
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])
        except (ValueError, TypeError):
            raise ValueError(
                f"{ENCRYPTION_KEY_ENV} must hold Fernet keys (32 url-safe base64-encoded bytes, "
                "comma-separated); make one with: python3 -c 'from cryptography.fernet import "
                "Fernet; print(Fernet.generate_key().decode())'"
            ) from None

    def encrypt(self, plaintext: str) -> str:
        """The token of ``plaintext`` (ASCII; a new random IV each call, so equal values differ)."""
        return self._fernet.encrypt(plaintext.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """The plaintext of ``token``. Raises SecretUnreadable (wrong key, altered token)."""
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError, ValueError):
            raise SecretUnreadable(
                f"a stored secret cannot be decrypted: the encryption key changed "
                f"({ENCRYPTION_KEY_ENV} or {KEY_FILE}) or the value was altered; "
                "restore the key or set the secret again"
            ) from None

    def __repr__(self) -> str:
        return "SecretBox(<keys hidden>)"


def mask(plaintext: str | None) -> str:
    """What a person may see of a secret: its first 3 and last 4 characters around an
    ellipsis (``sk-…a1b2``) when it is long enough that this leaves most of it hidden
    (16 characters or more), else ``****``; empty for no value."""
    if not plaintext:
        return ""
    if len(plaintext) < 16:
        return "****"
    return f"{plaintext[:3]}…{plaintext[-4:]}"


_BOXES: dict[tuple[str, ...], SecretBox] = {}


def secret_box_for(settings: Any) -> SecretBox:
    """The secret box of a deployment (module docstring): the keys of
    ``FLOWLOOM_ENCRYPTION_KEY`` in ``settings.environ()``, else ``<settings.home>/secret.key``
    (created on first use). Cached per key set.

    Raises:
        ValueError: the variable holds something that is not a Fernet key.
        OSError: the key file cannot be created or read.
    """
    env: Mapping[str, str] = settings.environ()
    configured = [k.strip() for k in str(env.get(ENCRYPTION_KEY_ENV, "") or "").split(",") if k.strip()]
    keys = tuple(configured) if configured else (_key_file(Path(settings.home)),)
    box = _BOXES.get(keys)
    if box is None:
        box = _BOXES[keys] = SecretBox([k.encode("ascii") for k in keys])
    return box


def _key_file(home: Path) -> str:
    """The key in ``home/secret.key``, written (0600, exclusively: two processes starting
    together agree on one key) when the file does not exist."""
    from cryptography.fernet import Fernet

    from engine.settings import private_directory

    path = private_directory(home) / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as handle:
            handle.write(Fernet.generate_key())
    for _ in range(50):  # another process may be between its create and its write
        text = path.read_text(encoding="ascii").strip()
        if text:
            return text
        time.sleep(0.02)
    raise OSError(
        f"the key file {path} is empty; delete it to make a new key (secrets stored with the old "
        "one are then unreadable)"
    )
