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


def refuse_what_is_missing(doc: dict[str, Any], titles: dict[str, str]) -> list[Any]:
    """Exit 2 when running ``doc`` here needs a model API key, a secret, an operator
    setting, a code package or a dataset that is not set, installed or made
    (``missing_api_key``, ``missing_secret``, ``disabled_by_operator``, ``missing_package``,
    ``unknown_dataset``: :func:`engine.shapes.deployment_problems`), every one of them
    printed on stderr as an error; when nothing is missing, return the document's valid
    nodes (for the caller's other checks), after a warning per searched dataset that has
    no document yet.

    Raises:
        typer.Exit: with code 2, after printing the problems.
    """
    from engine.shapes import deployment_problems, valid_nodes
    from nodes import builtin_catalog
    from nodes.llm.model_registry import registry_for

    from .loading import tenant_datasets

    current, catalog = settings(), builtin_catalog()
    nodes = valid_nodes(doc, catalog)
    datasets = tenant_datasets(nodes)
    missing = [
        dataclasses.replace(problem, severity="error")  # here none of them is only a warning
        for problem in deployment_problems(
            doc,
            catalog=catalog,
            settings=current,
            models=registry_for(current),
            nodes=nodes,
            datasets=datasets,
        )
        if problem.code != "retrieval_degraded"  # lacks nothing: the run searches by full text, and says so
    ]
    if not missing:
        _warn_empty_datasets(nodes, datasets or {})
        return nodes
    err().print(
        Text("cannot run: this deployment lacks what the workflow needs (nothing was run):", style="bold red")
    )
    print_problems(missing, err(), titles)
    raise typer.Exit(EXIT_INVALID)


def _warn_empty_datasets(nodes: list[Any], datasets: dict[str, Any]) -> None:
    """A warning on stderr per searched dataset with no document yet: its searches find
    nothing, so the answer would be made without sources (the run still starts)."""
    from engine.shapes import searched_datasets

    for dataset_id in sorted(searched_datasets(nodes)):
        dataset = datasets.get(dataset_id)
        if dataset is not None and dataset.document_count == 0:
            err().print(
                Text(
                    f"warning: dataset {dataset_id!r} has no documents yet, so its searches find nothing; "
                    f"add some with `flowloom datasets add {dataset_id} FILES --wait`",
                    style="yellow",
                )
            )
