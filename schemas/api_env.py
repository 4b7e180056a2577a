"""Request and answer bodies of ``/v1/workflows/{id}/secrets``: which secret
environment variables of a workflow have a value, and setting them. A value is
only ever sent to the server, never returned (:mod:`schemas.env_vars`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SecretStatus", "SecretsOut", "SecretsUpdate"]


class SecretStatus(BaseModel):
    """One secret the draft declares (or one set for a name it no longer declares)."""

    name: str
    set: bool = Field(description="a value is stored (encrypted)")
    declared: bool = Field(description="the draft declares it as a secret environment variable")
    updated_at: float | None = Field(default=None, description="Unix seconds the value was last set")


class SecretsOut(BaseModel):
    """The workflow's secrets and whether each has a value; never the values."""

    workflow_id: str
    secrets: list[SecretStatus]


class SecretsUpdate(BaseModel):
    """``PUT /v1/workflows/{id}/secrets``: ``{name: value}``; ``null`` deletes that value.
    Names must be declared as secrets by the draft."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, str | None] = Field(max_length=200)
