"""Config model of the ``code`` node kind: user Python or JavaScript run in a sandbox.

Behaviour lives in ``nodes/sandbox/code.py`` (and the sandbox in ``nodes/sandbox/process.py``). The
code is only ever text here: the compiler and validation never execute, import or
compile it - a syntax error shows up when the node runs, as a node error naming the
line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .code_imports import third_party_imports
from .nodes import OUTPUT_NAME, NodeConfig, Requirement, node_kind
from .nodes_agent import BUILTIN_TOOL_NAMES
from .types import VarType
from .values import InputBinding

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = ["CodeConfig", "CodeInput", "CodeOutput"]


class CodeOutput(BaseModel):
    """One declared output of the code: ``main`` must return this key with a value of ``type``.

    The name is any key ``main`` may return (``result``, ``结果``, ``a-b``, ``a.b``), read as
    ``code["a-b"]`` / ``code['say "hi"']``; only a name holding both quote kinds, which no
    reference could spell, is refused.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=OUTPUT_NAME)
    type: VarType = VarType.any


class CodeInput(InputBinding):
    """A bound input of the code. The name is any non-empty key: Python receives the inputs
    as keyword arguments (``main(**inputs)``: ``def main(数据)`` or ``def main(**kw)`` reading
    ``kw["a-b"]``), JavaScript as one object (``inputs["a-b"]``), so imported keys such as
    ``数据`` or ``a-b`` arrive unchanged."""

    name: str = Field(min_length=1, max_length=200, description="the key main() receives the value under")


@node_kind("code", "Code")
class CodeConfig(NodeConfig):
    """Runs the main function of its code in a separate, sandboxed process.

    - Python: ``def main(**inputs)`` (or named parameters), returning a dict.
    - JavaScript: ``function main(inputs)`` / ``async function main(inputs)`` receiving
      one object (``function main({a, b})`` as in FastGPT's templates), returning an object.

    ``inputs`` are bound by name (typed like any binding). The node's outputs are
    exactly the declared ``outputs``: each must be in the returned object with a value
    of its type (null passes, as everywhere); other returned keys are ignored.
    ``timeout`` is the wall time in seconds, ``memory_mb`` the memory limit in MiB,
    ``max_output_bytes`` caps the returned JSON and, separately, what the code prints.

    ``tool`` runs a builtin tool (:mod:`nodes.agent.builtin_tools`, Flowloom's own code, in the
    engine process) instead of code: the inputs are its arguments and its outputs are
    ``text`` (the tool's text), ``json`` (``[value]`` when the tool's value is an object,
    as Dify lists JSON messages, else ``[]``) and ``files`` (``[]``), as a Dify tool node
    gives, and ``result``: the value as data (the parsed object of ``json_parse``, the
    matches of ``regex_extract``, the number of ``eval_expression``, else the text);
    ``language`` and ``code`` stay unset.

    ``semantics`` (set by the FastGPT importer; native nodes keep ``strict``) makes an
    imported node behave as it did at home:

    - ``strict``: the rules above.
    - ``fastgpt``: each input named in ``input_types`` is converted to that type the way
      FastGPT converts inputs to their declared ``valueType`` (string: other values as
      JSON text; number: numeric text as a number, else null; boolean: ``"true"`` /
      truthiness; object/array: JSON text parsed when it holds one); outputs are not
      type-checked and an output ``main`` leaves out is null (FastGPT leaves it
      undefined); JavaScript code also gets FastGPT's sandbox globals ``delay(ms)``,
      ``countToken(text)``, ``strToBase64(text, prefix)`` and ``createHmac(algorithm,
      secret)``. The declared outputs are then of type ``any`` for the compiler, since
      nothing checks them.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    language: Literal["python", "javascript"] | None = Field(default=None, description="required with code")
    code: str = Field(default="", description="defines main(**inputs) (Python) / main(inputs) (JavaScript)")
    tool: str | None = Field(
        default=None, description="a builtin tool run instead of code (imported Dify tool nodes)"
    )
    inputs: list[CodeInput] = Field(default_factory=list)
    outputs_: list[CodeOutput] = Field(default_factory=list, alias="outputs")
    timeout: float = Field(default=10.0, gt=0, le=300, description="wall time in seconds")
    memory_mb: int = Field(default=256, ge=64, le=8192, description="memory limit in MiB")
    max_output_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        le=64 * 1024 * 1024,
        description="cap on the returned JSON and on printed output",
    )
    semantics: Literal["strict", "fastgpt"] = Field(
        default="strict",
        description="strict typing, or FastGPT's (input conversion, unchecked outputs, globals)",
    )
    input_types: dict[str, VarType] = Field(
        default_factory=dict, description="semantics fastgpt: input name -> type it is converted to"
    )

    @model_validator(mode="after")
    def _unique_names(self) -> CodeConfig:
        if self.tool is not None:
            if self.tool not in BUILTIN_TOOL_NAMES:
                raise ValueError(
                    f"tool: {self.tool!r} is not a builtin tool (builtin tools: "
                    f"{', '.join(sorted(BUILTIN_TOOL_NAMES))})"
                )
            if self.code.strip():
                raise ValueError("set either code or tool, not both")
        elif not self.code.strip() or self.language is None:
            raise ValueError("code and language are required (or tool, for a builtin tool)")
        for label, names in (
            ("input", [b.name for b in self.inputs]),
            ("output", [o.name for o in self.outputs_]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{label} names must be unique: {dupes}")
        unknown = sorted(set(self.input_types) - {b.name for b in self.inputs})
        if unknown:
            raise ValueError(f"input_types names inputs that are not bound: {unknown}")
        return self

    def requirements(self) -> Iterator[Requirement]:
        """Each third-party module the code imports (``import numpy``, ``require('lodash')``)
        must be installed in the sandbox's package environment: the sandbox never
        installs anything while code runs."""
        if self.tool is not None or self.language is None:
            return
        for module in third_party_imports(self.language, self.code):
            yield Requirement(
                kind="package",
                name=module,
                language=self.language,
                path="config.code",
                why=f"the code imports {module}",
            )

    def outputs(self, workflow: Workflow) -> dict[str, VarType]:
        if self.tool is not None:
            return {
                "text": VarType.string,
                "json": VarType.array,
                "files": VarType.array,
                "result": VarType.any,
            }
        if self.semantics == "fastgpt":
            return {o.name: VarType.any for o in self.outputs_}
        return {o.name: o.type for o in self.outputs_}
