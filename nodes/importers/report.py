"""What an import produces: the workflow, and a report of everything that did not carry over."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from engine.code_packages import PackageNeed, install_commands
from engine.errors import DefinitionError

__all__ = [
    "API_MODEL_HINTS",
    "CLI_MODEL_HINTS",
    "ImportFailed",
    "ImportIssue",
    "ImportResult",
    "ModelHints",
    "package_commands",
]


def package_commands(packages: list[dict[str, Any]]) -> list[str]:
    """One ``flowloom sandbox install`` command per language for the packages of
    ``packages`` (:attr:`ImportResult.packages`) that are not installed."""
    return install_commands(
        [
            PackageNeed(p["language"], p["module"], p["requirement"], p["installed"])
            for p in packages
            if not p["installed"]
        ]
    )


@dataclass(frozen=True, slots=True)
class ImportIssue:
    """One finding of an import, located by the node id *in the source file*.

    ``severity``:

    - ``error``: something could not be converted (an unsupported node kind, an
      unknown model, a reference with no Flowloom equivalent, ...). The import fails
      unless ``allow_partial`` is set; then the node is a failing ``unsupported``
      placeholder (or, for an unknown model, the fallback model named in the message).
    - ``warning``: converted, with a difference worth knowing (e.g. a loop limit that
      fails instead of stopping silently).

    ``code`` is stable (tests and the canvas key on it): ``unsupported_node``,
    ``unsupported_reference``, ``unsupported_feature``, ``unsupported_tool`` (a tool of an
    agent that cannot come over; the agent converts without it), ``missing_package``,
    ``unknown_model``, ``invalid_source``, ``compile_<compiler problem code>``, ``renamed_id``,
    ``renamed_key``, ``behaviour_difference``, ``missing_setting`` (a value the file leaves out
    or masks - an MCP URL, a credential, another app - that the user must fill in), ``dropped``,
    ``unknown_dataset`` (a dataset mapping names a dataset the tenant lacks).
    """

    code: str
    message: str
    node_id: str | None = None
    source_type: str | None = None
    severity: Literal["error", "warning"] = "error"
    #: the node's id in the imported workflow when it differs from ``node_id``
    flowloom_id: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.node_id is not None:
            kind = f" ({self.source_type})" if self.source_type else ""
            renamed = (
                f" -> {self.flowloom_id}" if self.flowloom_id and self.flowloom_id != self.node_id else ""
            )
            where = f"node {self.node_id!r}{kind}{renamed}: "
        return f"[{self.code}] {where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``flowloom import --json``, the API)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ModelHints:
    """How a report message tells the user to map a model, in the caller's own terms:
    ``flowloom import`` has a ``--model SOURCE=NAME`` flag, the HTTP API a ``model_map``
    field. The importer decides *when* to advise a mapping; the caller only how it reads,
    so the import logic exists once. ``style``: ``"cli"`` or ``"api"``."""

    style: Literal["cli", "api"]

    def mapping(self, source: str, target: str = "NAME") -> str:
        """The mapping ``source`` -> ``target``: ``--model 'a=NAME'`` or ``"model_map": {"a": "NAME"}``."""
        if self.style == "cli":
            return f"--model '{source}={target}'"
        return f'"model_map": {{{json.dumps(source, ensure_ascii=False)}: {json.dumps(target, ensure_ascii=False)}}}'

    def map_unknown(self, source: str) -> str:
        """The advice for an unknown model ``source`` (``""``: a node without a model)."""
        if not source:
            return self.mapping("*")
        return f"{self.mapping(source)} (or {self.mapping('*')} for every unknown model)"


#: ``flowloom import``'s advice: its ``--model`` flag
CLI_MODEL_HINTS = ModelHints("cli")
#: the HTTP API's advice: the ``model_map`` field of ``POST /v1/workflows/import``
API_MODEL_HINTS = ModelHints("api")


@dataclass(slots=True)
class ImportResult:
    """A converted workflow (a Flowloom workflow document that compiles) and the report."""

    workflow: dict[str, Any]
    report: list[ImportIssue] = field(default_factory=list)
    #: ``fastgpt``, ``dify`` or ``flowloom``
    source_format: str = ""
    #: source model name (``""``: none set) -> the registry model it became
    models: dict[str, str] = field(default_factory=dict)
    #: source dataset id (``"*"``: a search with none selected) -> the dataset id it became
    datasets: dict[str, str] = field(default_factory=dict)
    #: the packages code nodes import (:func:`nodes.importers.code_scan.package_summary`)
    packages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def install_commands(self) -> list[str]:
        """The commands that install the packages the code nodes need and lack."""
        return package_commands(self.packages)

    @property
    def errors(self) -> list[ImportIssue]:
        """Issues of severity ``error`` (present only in a partial import)."""
        return [i for i in self.report if i.severity == "error"]

    @property
    def partial(self) -> bool:
        """True when something was replaced by a placeholder or a fallback."""
        return bool(self.errors)


class ImportFailed(DefinitionError):
    """The file cannot be imported as it is; ``report`` lists every problem at once."""

    @property
    def install_commands(self) -> list[str]:
        """The commands that install the packages the code nodes need and lack."""
        return package_commands(self.packages)

    def __init__(
        self, report: list[ImportIssue], source_format: str = "", packages: list[dict[str, Any]] | None = None
    ):
        self.report = report
        self.source_format = source_format
        #: as :attr:`ImportResult.packages`: what the code nodes import, installed or not
        self.packages = packages or []
        errors = [i for i in report if i.severity == "error"]
        super().__init__(
            f"{len(errors)} problem(s) importing the {source_format or 'file'}:\n"
            + "\n".join(f"  - {i}" for i in errors)
        )
