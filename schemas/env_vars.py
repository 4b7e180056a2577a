"""Environment variables of a workflow (``env.NAME``), Dify's ``environment_variables``.

A workflow declares them in ``environment``: ``{name, type, value, description}`` with
``type`` one of ``string``, ``number`` or ``secret``. Nodes read them as references
(``{"ref": "env.NAME"}``) and in templates (``{{ env.NAME }}``), like ``inputs.NAME``.

Where the values live:

- ``string`` and ``number`` values are part of the document (draft, published
  versions, exports): they are settings of the workflow, not credentials.
- A ``secret``'s value is never part of a document: its ``value`` is ``null`` (or
  ``""`` in an export, where the ``secret`` type is the marker that a value must be
  given after import). The value is kept encrypted in the run store, per tenant and
  per workflow id (``workers.sql.env_secrets``: the tenant's ``workflow_secrets`` rows, under
  the deployment's encryption key), and read when a run executes, so a
  new value is used by the next run of the draft and of every published version
  without publishing again (published documents name the secret, not its value).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .types import VarType

__all__ = ["MASK", "EnvType", "EnvVar", "secret_names", "strip_secret_values"]

#: what a secret's value reads as wherever it would be shown (API answers, traces, events, logs)
MASK = "******"


class EnvType(StrEnum):
    """The type of an environment variable; a ``secret`` reads as a string."""

    string = "string"
    number = "number"
    secret = "secret"

    def var_type(self) -> VarType:
        """The type references to it have (a secret is a string)."""
        return VarType.number if self is EnvType.number else VarType.string


class EnvVar(BaseModel):
    """One declared environment variable (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)
    type: EnvType = EnvType.string
    value: str | float | int | None = Field(
        default=None,
        description="the value; always null (or empty) for a secret, whose value is stored encrypted",
    )
    description: str = ""

    @model_validator(mode="after")
    def _fits(self) -> EnvVar:
        if self.type is EnvType.secret and self.value not in (None, ""):
            raise ValueError(
                f"environment variable {self.name!r} is a secret: its value is not part of the "
                "document (set it with PUT /v1/workflows/{id}/secrets or the canvas's Environment section)"
            )
        if self.type is EnvType.number and isinstance(self.value, str):
            try:
                self.value = float(self.value) if any(c in self.value for c in ".eE") else int(self.value)
            except ValueError:
                raise ValueError(
                    f"environment variable {self.name!r} is a number; {self.value!r} is not"
                ) from None
        if self.type is EnvType.string and isinstance(self.value, (int, float)):
            self.value = str(self.value)
        return self


def secret_names(doc: Any) -> list[str]:
    """The names of the secrets a workflow document (a dict) declares, in order."""
    env = doc.get("environment") if isinstance(doc, dict) else None
    return [
        str(v["name"])
        for v in env or []
        if isinstance(v, dict) and v.get("type") == "secret" and v.get("name")
    ]


def strip_secret_values(doc: dict[str, Any], *, blank: Any = None) -> tuple[dict[str, Any], dict[str, str]]:
    """``(doc without secret values, {name: value})``: the values a client put in a
    document it saves (the canvas sends a new secret value this way, once), taken out so
    the document is stored without them. A value equal to :data:`MASK` or empty means
    "unchanged" and is not returned. ``blank``: what a secret's ``value`` becomes."""
    env = doc.get("environment")
    if not isinstance(env, list):
        return doc, {}
    values: dict[str, str] = {}
    cleaned: list[Any] = []
    for var in env:
        if isinstance(var, dict) and var.get("type") == "secret":
            value = var.get("value")
            if isinstance(value, (str, int, float)) and value not in ("", MASK) and var.get("name"):
                values[str(var["name"])] = str(value)
            var = {**var, "value": blank}
        cleaned.append(var)
    return {**doc, "environment": cleaned}, values
