"""Knowledge-base search nodes of FastGPT and Dify -> ``knowledge_retrieval``: the dataset
ids and the search settings both share.

**Dataset ids.** A source dataset id becomes ``dataset_map[id]``, else
``dataset_map["*"]``, else stays itself (made a valid dataset id): then the report warns
(``unmapped_dataset``) with the commands that create a dataset of that id and fill it
(``flowloom datasets create NAME --id ID --embedding-model MODEL``, ``flowloom
datasets add ID FILES --wait``) and how to map it instead (``--dataset 'SOURCE=ID'`` /
``"dataset_map"``). A mapping whose source no search names is reported
(``unmatched_dataset``: a mistyped id). A search node with no dataset at all (a template whose user has not
chosen one) and no ``"*"`` mapping cannot search: that is an error (``unmapped_dataset``;
a partial import makes it a placeholder).

**Settings** carried over: the score threshold (FastGPT ``similarity``, Dify
``score_threshold``), the quote budget (FastGPT ``limit`` tokens), ``top_k`` (Dify),
the mode (FastGPT ``searchMode``: ``embedding`` / ``fullTextRecall`` / ``mixedRecall``;
Dify ``search_method``), weighted fusion (Dify's ``weighted_score``), a rerank model of
the registry. What does not carry over is named in the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from .base import BaseImporter, Planned, number
from .refs import Unconvertible
from .report import ImportIssue, ModelHints

__all__ = ["CONCAT_CODE", "DatasetImport", "FASTGPT_MODES", "dataset_mapping", "unknown_targets"]

#: FastGPT ``searchMode`` -> Flowloom ``mode``
FASTGPT_MODES = {"embedding": "semantic", "fullTextRecall": "full_text", "mixedRecall": "hybrid"}

_INVALID = re.compile(r"[^A-Za-z0-9_.-]+")

#: FastGPT's datasetConcatNode as a sandboxed Python code node: the searches' chunks merged
#: by reciprocal rank fusion (k = 60, as FastGPT merges them), each chunk once, then kept
#: in that order while their estimated tokens fit ``limit`` (the first always).
CONCAT_CODE = (
    "def main(lists, limit):\n"
    "    # FastGPT's datasetConcatNode: RRF over the search results, each chunk once, then the token limit\n"
    "    scores, first = {}, {}\n"
    "    for items in lists:\n"
    "        for rank, chunk in enumerate(items or [], start=1):\n"
    "            key = chunk.get('chunk_id') or chunk.get('text')\n"
    "            scores[key] = scores.get(key, 0.0) + 1.0 / (60 + rank)\n"
    "            first.setdefault(key, chunk)\n"
    "    out, used = [], 0\n"
    "    for key in sorted(first, key=lambda k: -scores[k]):\n"
    "        text = first[key].get('text') or ''\n"
    "        wide = sum(1 for ch in text if ord(ch) >= 128)\n"
    "        cost = wide + (len(text) - wide + 3) // 4\n"
    "        if out and limit and used + cost > limit:\n"
    "            break\n"
    "        out.append(first[key])\n"
    "        used += cost\n"
    "    return {'chunks': out}\n"
)


def dataset_mapping(hints: ModelHints, source: str, target: str = "ID") -> str:
    """How to map dataset ``source`` to ``target`` in the caller's terms: ``--dataset 'a=ID'``
    (``flowloom import``) or ``"dataset_map": {"a": "ID"}`` (the HTTP API)."""
    if hints.style == "cli":
        return f"--dataset '{source}={target}'"
    return f'"dataset_map": {{{json.dumps(source, ensure_ascii=False)}: {json.dumps(target, ensure_ascii=False)}}}'


def unknown_targets(
    datasets: Mapping[str, str], dataset_map: Mapping[str, str], known: Collection[str], hints: ModelHints
) -> list[ImportIssue]:
    """An ``unknown_dataset`` warning per dataset a mapping of ``dataset_map`` chose
    (``datasets``: source id -> the id it became, :attr:`ImportResult.datasets`) that is not
    among ``known`` (the tenant's dataset ids), with the closest id it has and the commands
    that create it or map to another.

    A mistyped target (``ofice`` for ``office``) imports cleanly, and its searches would
    fail only when the workflow runs; when the caller knows the tenant's datasets, the
    import says so at once. Unmapped sources are left out: their ``unmapped_dataset``
    warning already says the id must exist."""
    from engine.plain_errors import closest, did_you_mean

    issues: list[ImportIssue] = []
    for target, sources in _by_target(datasets, dataset_map).items():
        if target in known:
            continue
        hint = did_you_mean(target, known)
        if hints.style == "cli":
            create = f"flowloom datasets create NAME --id {target}, then flowloom datasets add {target} FILES --wait"
        else:
            create = f'POST /v1/datasets {{"name": "NAME", "id": {json.dumps(target, ensure_ascii=False)}}}'
        issues.append(
            ImportIssue(
                "unknown_dataset",
                f"dataset {target!r} (mapped from {', '.join(map(repr, sources))}) does not exist for this "
                f"tenant{hint}: its searches would fail when the workflow runs; map to a dataset you have "
                f"with {dataset_mapping(hints, sources[0], closest(target, known) or 'ID')}, or create it with {create}",
                severity="warning",
            )
        )
    return issues


def _by_target(datasets: Mapping[str, str], dataset_map: Mapping[str, str]) -> dict[str, list[str]]:
    """The ids the caller's mappings chose -> the mapping sources that chose them (``"*"``
    for the sources only the catch-all mapped)."""
    chosen: dict[str, list[str]] = {}
    for source, target in datasets.items():
        given = source if source in dataset_map else "*" if "*" in dataset_map else None
        if given is not None and given not in chosen.setdefault(target, []):
            chosen[target].append(given)
    return {target: sources for target, sources in chosen.items() if sources}


class DatasetImport(BaseImporter):
    """The dataset mapping every importer shares (module docstring); mixed into the
    importers before their node converters."""

    def dataset_hint(self, source: str, target: str = "ID") -> str:
        """How to map dataset ``source`` in the caller's terms (CLI flag or API field)."""
        return dataset_mapping(self.hints, source, target)

    def dataset_ids(self, sources: list[str], p: Planned, names: dict[str, str] | None = None) -> list[str]:
        """The Flowloom dataset ids of ``sources`` (module docstring); ``names``: source id ->
        its name in the source (for the create command), when the source has it.

        Raises:
            Unconvertible: (``unmapped_dataset``) no dataset in the source and no ``"*"`` mapping.
        """
        dataset_map: dict[str, str] = getattr(self, "dataset_map", {}) or {}
        out: list[str] = []
        if not sources:
            if "*" not in dataset_map:
                raise Unconvertible(
                    f"the search node has no dataset selected in the source; map one with "
                    f"{self.dataset_hint('*')} (create and fill one with: flowloom datasets create "
                    "NAME --id ID --embedding-model MODEL, then flowloom datasets add ID FILES "
                    "--wait)",
                    "unmapped_dataset",
                )
            sources = ["*"]
        for source in sources:
            target = dataset_map.get(source) or dataset_map.get("*")
            if target is None:
                target = _INVALID.sub("_", source)[:64] or "dataset"
                name = (names or {}).get(source) or target
                self.warn(
                    "unmapped_dataset",
                    f"dataset {source!r} is not mapped: it is searched as dataset "
                    f"{target!r}, which must exist when the workflow runs. Create and fill it with: "
                    f"flowloom datasets create {json.dumps(name, ensure_ascii=False)} --id {target} "
                    f"--embedding-model MODEL, then flowloom datasets add {target} FILES --wait; or map it "
                    f"to a dataset you have with {self.dataset_hint(source)}",
                    p,
                )
            self.datasets_mapped[source] = target
            if target not in out:
                out.append(target)
        return out

    @property
    def datasets_mapped(self) -> dict[str, str]:
        """Source dataset id (``"*"``: none selected) -> the dataset id it became."""
        if not hasattr(self, "_datasets_mapped"):
            self._datasets_mapped: dict[str, str] = {}
        return self._datasets_mapped

    def rerank_settings(self, model: Any, p: Planned, top_n: Any = None) -> dict[str, Any] | None:
        """``rerank`` for a source rerank model: the registry's model of that name (or the
        mapped one), else None with a warning that rerank was not carried over."""
        name = str(model or "").strip()
        model_map = self.model_map
        target = model_map.get(name) if name else None
        registry = self.registry
        if target is None and name and registry is not None and registry.has(name, "rerank"):
            target = name
        if target is None or (registry is not None and not registry.has(target, "rerank")):
            what = f"rerank model {name!r}" if name else "rerank (no model named)"
            self.warn(
                "not_carried_over",
                f"{what} is not in the model registry: results are not reranked; map it "
                f"with {self.hints.mapping(name or 'RERANK', 'NAME')} to a rerank model",
                p,
            )
            return None
        self.models[name] = target
        out: dict[str, Any] = {"model": target}
        n = number(top_n)
        if n is not None and 1 <= int(n) <= 200:
            out["top_n"] = int(n)
        return out

    def threshold(self, value: Any) -> float | None:
        """A score threshold in [0, 1] (out-of-range or missing: None)."""
        n = number(value)
        if n is None or not 0 < float(n) <= 1:
            return None
        return round(float(n), 4)
