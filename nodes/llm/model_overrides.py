"""Overrides of the model registry: change a model's capabilities and limits without
copying the bundled registry.

Three sources, applied in this order over the registry file (later wins, key by key):

1. **The override file**: ``FLOWLOOM_MODELS_OVERRIDE`` (``Settings.models_override``),
   else ``<home>/models.override.toml`` when it exists. The same layout as the
   registry, with only the keys that change; tables merge key by key, so
   ``capabilities = { tools = "forced" }`` keeps the model's other capabilities::

       [models.default]
       max_context = 4096
       capabilities = { tools = "forced", stream_usage = false }

   A ``[models.X]`` table for a model the registry lacks adds a model, so it must name
   its ``provider``; without one it is refused as a misspelt name.
   ``flowloom models probe NAME --write`` writes here (:func:`write_override`).
2. **The environment**, for the ``default`` model only (the one ``FLOWLOOM_LLM_BASE_URL``
   points anywhere): :data:`DEFAULT_MODEL_ENV` lists the variables -
   ``FLOWLOOM_LLM_CONTEXT`` / ``FLOWLOOM_LLM_MAX_OUTPUT`` (tokens),
   ``FLOWLOOM_LLM_TOOLS`` (``native``, ``forced`` or ``none``) and the booleans
   ``FLOWLOOM_LLM_STRUCTURED_OUTPUT``, ``_JSON_MODE``, ``_STREAM_USAGE``, ``_VISION``,
   ``_TOOL_CHOICE``. A bad value is a :class:`ModelConfigError` naming the variable.
3. **Typed overrides** (:class:`ModelOverride`): what the API and per-tenant providers
   hold, applied to one :class:`~nodes.llm.model_registry.ModelSpec` with
   :meth:`ModelOverride.apply`.

Only ``FLOWLOOM_LLM_CONTEXT`` lowering the context keeps the output cap consistent: when
the context is set and the cap (the model's or the one set) does not fit below it, the
cap becomes a quarter of the context, so ``FLOWLOOM_LLM_CONTEXT=4096`` alone is valid.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .model_registry import (
    TOOL_SUPPORT,
    ModelConfigError,
    ModelSpec,
    ToolSupport,
    migrate_tool_calling,
)

__all__ = [
    "DEFAULT_MODEL_ENV",
    "CapabilityOverride",
    "ModelOverride",
    "apply_env_overrides",
    "dump_toml",
    "merge_registry_data",
    "read_override_file",
    "write_override",
]

#: The model the environment variables below change.
DEFAULT_MODEL = "default"

#: Environment variable -> (section, key) of the ``default`` model they set.
DEFAULT_MODEL_ENV: dict[str, tuple[str | None, str]] = {
    "FLOWLOOM_LLM_CONTEXT": (None, "max_context"),
    "FLOWLOOM_LLM_MAX_OUTPUT": (None, "max_output_tokens"),
    "FLOWLOOM_LLM_TOOLS": ("capabilities", "tools"),
    "FLOWLOOM_LLM_TOOL_CHOICE": ("capabilities", "tool_choice"),
    "FLOWLOOM_LLM_STRUCTURED_OUTPUT": ("capabilities", "structured_output"),
    "FLOWLOOM_LLM_JSON_MODE": ("capabilities", "json_mode"),
    "FLOWLOOM_LLM_STREAM_USAGE": ("capabilities", "stream_usage"),
    "FLOWLOOM_LLM_VISION": ("capabilities", "vision"),
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class _Override(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CapabilityOverride(_Override):
    """The capabilities to change; None keeps the model's. Fields: see
    :class:`~nodes.llm.model_registry.Capabilities` (``tool_calling``, the older bool, is
    read as ``tools``)."""

    tools: ToolSupport | None = None
    tool_choice: bool | None = None
    structured_output: bool | None = None
    json_mode: bool | None = None
    stream_usage: bool | None = None
    vision: bool | None = None
    reasoning: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "tool_calling" in data:
            return migrate_tool_calling(data)
        return data


class ModelOverride(_Override):
    """A model's limits and capabilities to change; None (or an absent capability) keeps
    the model's value. ``max_context``: the context window the server gives, in tokens;
    ``max_output_tokens``: the output cap. JSON: ``model_dump(exclude_none=True)``."""

    max_context: int | None = Field(default=None, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    capabilities: CapabilityOverride = Field(default_factory=CapabilityOverride)

    def table(self) -> dict[str, Any]:
        """The TOML/JSON table of the keys set (empty when nothing is)."""
        data = self.model_dump(exclude_none=True)
        if not data.get("capabilities"):
            data.pop("capabilities", None)
        return data

    def apply(self, spec: ModelSpec) -> ModelSpec:
        """``spec`` with these values over its own, validated again.

        Raises:
            ModelConfigError: the result is invalid (an output cap not below the context).
        """
        data = spec.model_dump()
        _merge_model(data, self.table(), context_set=self.max_context is not None)
        try:
            return ModelSpec(**data)
        except ValidationError as exc:
            raise ModelConfigError(f"override of model {spec.name!r}: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ()))
    return f"{where}: {error['msg']}" if where else str(error["msg"])


def _merge_model(base: dict[str, Any], changes: Mapping[str, Any], *, context_set: bool) -> None:
    """Merge ``changes`` into the model table ``base`` in place (tables key by key).

    A context set without an output cap that fits below it gets a quarter of it."""
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), Mapping):
            merged = dict(base[key])
            if key == "capabilities" and "tool_calling" in value and "tools" in merged:
                merged.pop("tools")  # the older key in an override replaces the base's value
            merged.update(value)
            if key == "capabilities" and value.get("tools") == "forced" and "tool_choice" not in value:
                merged["tool_choice"] = True  # forced calls working means tool_choice is honoured
            base[key] = merged
        else:
            base[key] = value
    if context_set and "max_output_tokens" not in changes:
        context, cap = base.get("max_context"), base.get("max_output_tokens")
        if isinstance(context, int) and isinstance(cap, int) and cap >= context:
            base["max_output_tokens"] = max(1, context // 4)


def merge_registry_data(
    data: Mapping[str, Any], overrides: Mapping[str, Any], *, source: str
) -> dict[str, Any]:
    """The registry layout ``data`` with ``overrides`` (the same layout) merged over it.

    Raises:
        ModelConfigError: naming ``source``: an unknown top-level key, a table that is
            not a table, or a model the registry lacks given without a ``provider``.
    """
    unknown = set(overrides) - {"providers", "models"}
    if unknown:
        raise ModelConfigError(f"model override {source}: unknown top-level keys {sorted(unknown)}")
    merged = {
        key: {name: dict(table) for name, table in dict(data.get(key) or {}).items()}
        for key in ("providers", "models")
    }
    merged.update({k: v for k, v in data.items() if k not in ("providers", "models")})
    for key in ("providers", "models"):
        for name, table in dict(overrides.get(key) or {}).items():
            if not isinstance(table, Mapping):
                raise ModelConfigError(f"model override {source}: {key}.{name} must be a table")
            if name not in merged[key] and "provider" not in table and key == "models":
                known = ", ".join(sorted(merged["models"])) or "(none)"
                raise ModelConfigError(
                    f"model override {source}: models.{name} is not in the registry "
                    f"(known: {known}); a new model needs a provider"
                )
            base = merged[key].setdefault(name, {})
            _merge_model(base, table, context_set=key == "models" and "max_context" in table)
    return merged


def read_override_file(path: Path) -> dict[str, Any]:
    """The parsed override file at ``path`` ({} when it does not exist).

    Raises:
        ModelConfigError: unreadable, or not valid TOML (names the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ModelConfigError(f"cannot read model override file {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelConfigError(f"model override file {path} is not valid TOML: {exc}") from None


def _env_value(var: str, key: str, raw: str) -> Any:
    value = raw.strip().lower()
    if key in ("max_context", "max_output_tokens"):
        if not value.isdigit() or int(value) <= 0:
            raise ModelConfigError(f"{var} must be a positive number of tokens, got {raw!r}")
        return int(value)
    if key == "tools":
        if value not in TOOL_SUPPORT:
            raise ModelConfigError(f"{var} must be one of {', '.join(TOOL_SUPPORT)}, got {raw!r}")
        return value
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ModelConfigError(f"{var} must be true or false, got {raw!r}")


def apply_env_overrides(data: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``data`` (registry layout) with the :data:`DEFAULT_MODEL_ENV` variables set in
    ``env`` applied to the ``default`` model (unchanged when none is set or the
    registry has no ``default`` model).

    Raises:
        ModelConfigError: a variable's value is invalid (names the variable).
    """
    table: dict[str, Any] = {}
    for var, (section, key) in DEFAULT_MODEL_ENV.items():
        raw = str(env.get(var, "") or "")
        if not raw.strip():
            continue
        value = _env_value(var, key, raw)
        if section is None:
            table[key] = value
        else:
            table.setdefault(section, {})[key] = value
    if not table or DEFAULT_MODEL not in dict(data.get("models") or {}):
        return dict(data)
    return merge_registry_data(data, {"models": {DEFAULT_MODEL: table}}, source="the environment")


def write_override(path: Path, model: str, override: ModelOverride) -> None:
    """Merge ``override`` into the ``[models.<model>]`` table of the override file at
    ``path`` (created, with its folder, when missing); other models and keys are kept
    (comments are not: the file is written again from its values).

    Raises:
        ModelConfigError: the existing file is unreadable or invalid.
    """
    data = read_override_file(path)
    models = data.setdefault("models", {})
    current = dict(models.get(model) or {})
    _merge_model(current, override.table(), context_set=False)
    models[model] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_toml(data), encoding="utf-8")


def dump_toml(data: Mapping[str, Any]) -> str:
    """TOML text of ``data``, the registry layout: one ``[section."name"]`` table per entry,
    nested tables inline. Values: str, bool, int, float, lists and tables of them."""
    lines = ["# Overrides of the model registry (merged key by key over it).", ""]
    for section, entries in data.items():
        if not isinstance(entries, Mapping):
            lines.append(f"{_toml_key(section)} = {_toml_value(entries)}")
            continue
        for name, table in entries.items():
            lines.append(f"[{_toml_key(section)}.{_toml_key(name)}]")
            lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in dict(table).items())
            lines.append("")
    return "\n".join(lines)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # a JSON string is a TOML basic string, but for DEL, which TOML wants escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ModelConfigError(f"cannot write {type(value).__name__} values to a model override file")
