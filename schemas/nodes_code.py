"""Config model of the ``code`` node kind: user Python or JavaScript run in a sandbox.

Behaviour lives in ``nodes/code.py`` (and the sandbox in ``nodes/sandbox.py``). The
code is only ever text here: the compiler and validation never execute, import or
compile it - a syntax error shows up when the node runs, as a node error naming the
line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .nodes import NodeConfig, node_kind
from .types import VarType
from .values import InputBinding

if TYPE_CHECKING:
    from .workflow import Workflow

__all__ = ["CodeConfig", "CodeOutput"]


class CodeOutput(BaseModel):
    """One declared output of the code: ``main`` must return this key with a value of ``type``.

    The name is any key ``main`` may return (``result``, ``结果``, ``a-b``), except quotes
    and brackets, which a reference (``code["a-b"]``) could not spell.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[^\"'\[\]]+$")
    type: VarType = VarType.any


@node_kind("code", "Code")
class CodeConfig(NodeConfig):
    """Runs ``main`` of ``code`` in a separate, sandboxed process.

    - Python: ``def main(**inputs)`` (or named parameters), returning a dict.
    - JavaScript: ``function main(inputs)`` / ``async function main(inputs)`` receiving
      one object (``function main({a, b})`` as in FastGPT's templates), returning an object.

    ``inputs`` are bound by name (typed like any binding). The node's outputs are
    exactly the declared ``outputs``: each must be in the returned object with a value
    of its type (null passes, as everywhere); other returned keys are ignored.
    ``timeout`` is the wall time in seconds, ``memory_mb`` the memory limit in MiB,
    ``max_output_bytes`` caps the returned JSON and, separately, what the code prints.

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

    language: Literal["python", "javascript"]
    code: str = Field(min_length=1, description="defines main(**inputs) (Python) / main(inputs) (JavaScript)")
    inputs: list[InputBinding] = Field(default_factory=list)
    outputs_: list[CodeOutput] = Field(default_factory=list, alias="outputs")
    timeout: float = Field(default=10.0, gt=0, le=300, description="wall time in seconds")
    memory_mb: int = Field(default=256, ge=64, le=8192, description="memory limit in MiB")
    max_output_bytes: int = Field(default=1024 * 1024, gt=0, le=64 * 1024 * 1024,
                                  description="cap on the returned JSON and on printed output")
    semantics: Literal["strict", "fastgpt"] = Field(
        default="strict", description="strict typing, or FastGPT's (input conversion, unchecked outputs, globals)")
    input_types: dict[str, VarType] = Field(
        default_factory=dict, description="semantics fastgpt: input name -> type it is converted to")

    @model_validator(mode="after")
    def _unique_names(self) -> "CodeConfig":
        for label, names in (("input", [b.name for b in self.inputs]), ("output", [o.name for o in self.outputs_])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{label} names must be unique: {dupes}")
        unknown = sorted(set(self.input_types) - {b.name for b in self.inputs})
        if unknown:
            raise ValueError(f"input_types names inputs that are not bound: {unknown}")
        return self

    def outputs(self, workflow: "Workflow") -> dict[str, VarType]:
        if self.semantics == "fastgpt":
            return {o.name: VarType.any for o in self.outputs_}
        return {o.name: o.type for o in self.outputs_}
