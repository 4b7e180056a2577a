"""What a workflow needs that this deployment lacks, checked by ``flowloom run`` before
a run starts.

``validate`` lists these as problems (``missing_api_key`` is only a warning there: the
operator may set the key before anyone runs the workflow). A run started now would fail
at the first node that needs the missing part, after the nodes before it ran (and were
paid for); so ``run`` refuses at once with exit 2, the code of configuration problems,
naming each node, field and variable to set.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import typer
from rich.text import Text

from .common import EXIT_INVALID, err, print_problems, settings

__all__ = ["refuse_what_is_missing"]


def refuse_what_is_missing(doc: dict[str, Any], titles: dict[str, str]) -> None:
    """Exit 2 when running ``doc`` here needs a model API key, a secret, an operator
    setting or a code package that is not set or installed (``missing_api_key``,
    ``missing_secret``, ``disabled_by_operator``, ``missing_package``:
    :func:`engine.shapes.deployment_problems`), every one of them printed on stderr as
    an error; return when nothing is missing.

    Raises:
        typer.Exit: with code 2, after printing the problems.
    """
    from engine.shapes import deployment_problems
    from nodes import builtin_catalog
    from nodes.llm.model_registry import registry_for

    current = settings()
    missing = [
        dataclasses.replace(problem, severity="error")  # here none of them is only a warning
        for problem in deployment_problems(
            doc, catalog=builtin_catalog(), settings=current, models=registry_for(current)
        )
    ]
    if not missing:
        return
    err().print(
        Text("cannot run: this deployment lacks what the workflow needs (nothing was run):", style="bold red")
    )
    print_problems(missing, err(), titles)
    raise typer.Exit(EXIT_INVALID)
