"""Nodes that call a language model, and the model call they share.

- the call: :mod:`.call` (:func:`~nodes.llm.call.call_llm`, through the ``openai`` SDK),
  :mod:`.errors` (what a failed request means), :mod:`.prompts` (message building) and
  :mod:`.json_scan` (one JSON value out of a free-text reply);
- the models: :mod:`.model_registry` (the operator's ``models.toml``, bundled here),
  :mod:`.model_overrides` (the operator's edits), :mod:`.tenant_registry` (a tenant's own
  providers over the operator's), :mod:`.provider_endpoints` and :mod:`.model_probe`
  (checking an endpoint and what a model really does);
- the nodes: :mod:`.chat` (the ``llm`` kind, whose helpers the other LLM nodes and the
  agent reuse), :mod:`.classify`, :mod:`.extract`, :mod:`.query_extension`, and
  :mod:`.sent_messages` (what the chat node records of the messages it sent).

The modules are imported by name; this package re-exports nothing, so importing it
loads neither the SDK nor a node.
"""
