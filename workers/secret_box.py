"""Encryption at rest of the secret values of environment variables.

AES-256-GCM (the ``cryptography`` package) under a key per tenant, derived with HKDF
(SHA-256) from the deployment's master key and the tenant id; the tenant id, the
workflow id and the variable name are the associated data of each value, so a
ciphertext moved to another tenant, workflow or name does not decrypt. A stored value
is ``version byte || 12-byte nonce || ciphertext+tag``.

The master key: ``FLOWLOOM_SECRET_KEY`` (any text of at least 32 characters; every
process that reads the same database needs the same one, so set it where runs execute
on several machines), else a random key kept in ``$FLOWLOOM_HOME/secret.key``, created
mode 0600 on first use. Losing it loses the secret values (they must be set again);
the rest of the store does not depend on it.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["KEY_ENV", "SecretBox", "SecretUnreadable", "master_key"]

KEY_ENV = "FLOWLOOM_SECRET_KEY"
_VERSION = b"\x01"
_KEY_FILE = "secret.key"


class SecretUnreadable(ValueError):
    """A stored value does not decrypt: another master key wrote it, or it was moved."""


def master_key(home: Path) -> bytes:
    """The deployment's master key (module docstring). Raises ValueError for a
    ``FLOWLOOM_SECRET_KEY`` shorter than 32 characters."""
    configured = os.environ.get(KEY_ENV)
    if configured:
        if len(configured) < 32:
            raise ValueError(f"{KEY_ENV} must be at least 32 characters long")
        return hashlib.sha256(configured.encode()).digest()
    path = home / _KEY_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(32)
    try:  # O_EXCL: two processes starting at once keep the first key written
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as out:
        out.write(key.hex())
    return key


class SecretBox:
    """Encrypts and decrypts secret values under the master key ``master`` returns (32
    bytes; read at the first use, so a deployment that keeps no secret makes no key file)."""

    def __init__(self, master: Callable[[], bytes]) -> None:
        self._load = master
        self._master: bytes | None = None
        self._keys: dict[str, AESGCM] = {}

    def _cipher(self, tenant_id: str) -> AESGCM:
        cipher = self._keys.get(tenant_id)
        if cipher is None:
            if self._master is None:
                self._master = self._load()
            key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                       info=b"flowloom env secrets\0" + tenant_id.encode()).derive(self._master)
            cipher = self._keys[tenant_id] = AESGCM(key)
        return cipher

    @staticmethod
    def _bound(tenant_id: str, workflow_id: str, name: str) -> bytes:
        return "\0".join((tenant_id, workflow_id, name)).encode()

    def seal(self, tenant_id: str, workflow_id: str, name: str, value: str) -> bytes:
        """The stored form of ``value``."""
        nonce = secrets.token_bytes(12)
        sealed = self._cipher(tenant_id).encrypt(nonce, value.encode(), self._bound(tenant_id, workflow_id, name))
        return _VERSION + nonce + sealed

    def open(self, tenant_id: str, workflow_id: str, name: str, stored: bytes) -> str:
        """The value :meth:`seal` stored. Raises SecretUnreadable."""
        if stored[:1] != _VERSION or len(stored) < 13 + 16:
            raise SecretUnreadable(f"secret {name!r} of workflow {workflow_id!r} is not a stored secret")
        try:
            plain = self._cipher(tenant_id).decrypt(stored[1:13], stored[13:], self._bound(tenant_id, workflow_id, name))
        except InvalidTag:
            raise SecretUnreadable(f"secret {name!r} of workflow {workflow_id!r} does not decrypt with this "
                                   f"deployment's key ({KEY_ENV} or secret.key changed?): set it again") from None
        return plain.decode()
