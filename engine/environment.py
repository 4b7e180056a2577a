"""A run's environment variables (``env.NAME``) and the masking of its secrets.

The document declares the variables (:mod:`schemas.env_vars`); ``string`` and
``number`` values come with it, a ``secret``'s value from a :class:`SecretStore`
(encrypted at rest, per tenant and workflow id). Each execution of a run - a start,
a resume, a recovery - reads them again (:func:`run_environment`), so a secret set
after a publish is the one the next run uses, and the values are never part of the
stored run state.

Masking: a node receives the real values; what is recorded about the run is not. A
:class:`Redactor` with the run's secret values replaces each occurrence by
:data:`~schemas.env_vars.MASK` in every event (node inputs, outputs, errors, the
answer) and in every checkpoint of the run state, so the stored trace, the API
answers built from it and the event stream never hold one. Log records made while a
run with secrets executes in this process are masked too (:func:`install_log_masking`).
Limits, said plainly: a value shorter than :data:`MIN_MASKED` characters is not masked
(masking every ``a`` would make traces unreadable, and such a value is no credential);
a value a node transformed (encoded, split, truncated) is not recognised; a node
reading an output that held a secret, from a run restored from its checkpoint or from
a node run a rerun reuses, reads the mask (the stored copy), not the value.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from schemas.env_vars import MASK, EnvType
from schemas.run import RunState
from schemas.workflow import Workflow

__all__ = [
    "MIN_MASKED",
    "MemorySecrets",
    "Redactor",
    "SecretStore",
    "install_log_masking",
    "release_environment",
    "run_environment",
]

#: secrets shorter than this are not searched for in records (module docstring)
MIN_MASKED = 4


@runtime_checkable
class SecretStore(Protocol):
    """Secret values of environment variables, per tenant and workflow id; stored
    encrypted. Every method is scoped by tenant: another tenant's values never answer."""

    async def secret_values(self, tenant_id: str, workflow_id: str) -> dict[str, str]:
        """``{name: plaintext}`` of every secret set for the workflow."""
        ...

    async def secret_status(self, tenant_id: str, workflow_id: str) -> dict[str, float]:
        """``{name: updated_at}`` (Unix seconds) of the secrets set; never the values."""
        ...

    async def set_secrets(self, tenant_id: str, workflow_id: str, values: Mapping[str, str | None]) -> None:
        """Set each value (encrypted); a ``None`` value deletes that secret."""
        ...

    async def delete_secrets(self, tenant_id: str, workflow_id: str) -> None:
        """Delete every secret of the workflow (the workflow was deleted)."""
        ...


class MemorySecrets:
    """A :class:`SecretStore` in memory (plaintext, this process only): for runs that
    keep nothing (tests, an embedding application that holds its own secrets)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], dict[str, tuple[str, float]]] = {}

    async def secret_values(self, tenant_id: str, workflow_id: str) -> dict[str, str]:
        return {n: v for n, (v, _at) in self._values.get((tenant_id, workflow_id), {}).items()}

    async def secret_status(self, tenant_id: str, workflow_id: str) -> dict[str, float]:
        return {n: at for n, (_v, at) in self._values.get((tenant_id, workflow_id), {}).items()}

    async def set_secrets(self, tenant_id: str, workflow_id: str, values: Mapping[str, str | None]) -> None:
        mine = self._values.setdefault((tenant_id, workflow_id), {})
        for name, value in values.items():
            if value is None:
                mine.pop(name, None)
            else:
                mine[name] = (value, time.time())

    async def delete_secrets(self, tenant_id: str, workflow_id: str) -> None:
        self._values.pop((tenant_id, workflow_id), None)


class Redactor:
    """Replaces a run's secret values by the mask in anything recorded about it.

    ``secrets``: the plaintext values; longer ones are replaced first, so a secret that
    contains another is masked whole."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_MASKED}, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        """``text`` with every secret masked."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def value(self, value: Any) -> Any:
        """``value`` (JSON-like, or a pydantic model) with every secret in it masked; the
        same object when nothing in it changed (nothing is copied for nothing)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out = {k: self.value(v) for k, v in value.items()}
            return value if all(out[k] is value[k] for k in value) else out
        if isinstance(value, (list, tuple)):
            items = [self.value(v) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return type(value)(items) if isinstance(value, tuple) else items
        if isinstance(value, BaseModel):
            changed = {}
            for name in type(value).model_fields:
                old = getattr(value, name)
                new = self.value(old)
                if new is not old:
                    changed[name] = new
            return value.model_copy(update=changed) if changed else value
        return value

    def state(self, state: RunState) -> RunState:
        """A copy of ``state`` to store: node runs, history, outputs, answer and error
        masked (the run's own state keeps the real values its nodes read)."""
        update = {
            name: self.value(getattr(state, name))
            for name in ("node_runs", "history", "outputs", "answer", "error", "variables", "interrupts")
        }
        return state.model_copy(update={k: v for k, v in update.items() if v is not getattr(state, k)})


async def run_environment(
    workflow: Workflow, tenant_id: str, secrets: SecretStore | None
) -> tuple[dict[str, Any], Redactor]:
    """The values of ``workflow``'s environment variables for a run of ``tenant_id``, and
    the redactor of its secrets. A secret with no value set is left out, so the node
    reading it fails with a message that names it and says it is not set (rather than
    sending an empty credential); the secret store is read only when a secret is declared."""
    values: dict[str, Any] = {}
    stored: dict[str, str] = {}
    if secrets is not None and any(v.type is EnvType.secret for v in workflow.environment):
        stored = await secrets.secret_values(tenant_id, workflow.id)
    plain: list[str] = []
    for var in workflow.environment:
        if var.type is EnvType.secret:
            if var.name in stored:  # an unset one is left out: reading it fails, naming it
                values[var.name] = stored[var.name]
                plain.append(stored[var.name])
        else:
            values[var.name] = (
                var.value if var.value is not None else ("" if var.type is EnvType.string else None)
            )
    redactor = Redactor(plain)
    if redactor:
        _masking.add(plain)
    return values, redactor


def release_environment(redactor: Redactor) -> None:
    """The run that used ``redactor`` ended here: its secrets leave the log masking."""
    if redactor:
        _masking.remove(redactor._secrets)


class _LogMasking:
    """The secrets of the runs executing in this process, masked in every log record
    (a record factory: loggers and handlers added later are covered too)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._redactor = Redactor(())
        self._lock = threading.Lock()
        self._installed = False

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._counts.update(s for s in secrets if len(s) >= MIN_MASKED)
            self._redactor = Redactor(self._counts)
        install_log_masking()

    def remove(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._counts.subtract(secrets)
            self._counts = +self._counts
            self._redactor = Redactor(self._counts)

    def install(self) -> None:
        with self._lock:
            if self._installed:
                return
            self._installed = True
            previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            redactor = self._redactor
            if redactor:
                try:
                    message = record.getMessage()
                except Exception:
                    return record
                masked = redactor.text(message)
                if masked != message:
                    record.msg, record.args = masked, ()
                error = record.exc_info[1] if record.exc_info else None
                if error is not None:
                    text = redactor.text(str(error))
                    if text != str(error):
                        record.exc_info, record.exc_text = None, f"{type(error).__name__}: {text}"
            return record

        logging.setLogRecordFactory(factory)


_masking = _LogMasking()


def install_log_masking() -> None:
    """Mask the secrets of executing runs in every log record of this process (idempotent)."""
    _masking.install()
