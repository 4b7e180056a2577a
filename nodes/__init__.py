"""Node behaviour, grouped by concern, and the built-in catalog that lists every kind.

:func:`builtin_catalog` (:mod:`nodes.catalog`) is the list of kinds; executor modules
are named there by import path and imported when a plan first needs them.

- :mod:`nodes.llm`: the model call, the model registries and the nodes that call a model
  (``llm``, ``classify_question``, ``extract_fields``, ``query_extension``);
- :mod:`nodes.agent`: the tool-loop kernel, ``tool_call`` and ``agent``, and the tools
  they offer (builtin, MCP);
- :mod:`nodes.sandbox`: the ``code`` node and the sandbox it runs user code in;
- :mod:`nodes.http`: the ``http_request`` node and the address guard (SSRF guard) all
  outbound requests use;
- :mod:`nodes.knowledge`: ``knowledge_retrieval``, document parsing, chunking, embeddings;
- :mod:`nodes.importers`: document translators (FastGPT JSON and Dify YAML to Flowloom
  workflows), which run no node;
- the plumbing kinds stay flat here: :mod:`.start`, :mod:`.template`, :mod:`.if_else`,
  :mod:`.loop`, :mod:`.variables`, :mod:`.interactive`, :mod:`.unsupported`; and the
  canvas's Chinese labels and help (:mod:`.labels_zh`, :mod:`.help_zh`).

A new kind is its config model in ``schemas/``, its executor in the folder of its
concern and one :class:`~engine.catalog.KindSpec` line in :mod:`nodes.catalog`.
"""

from .catalog import BUILTIN_KINDS, builtin_catalog

__all__ = ["BUILTIN_KINDS", "builtin_catalog"]
