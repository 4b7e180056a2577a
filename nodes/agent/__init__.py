"""Nodes that let a model call tools: ``tool_call`` and ``agent``, and the tools they offer.

- the tool-loop kernel both nodes run on: :mod:`.loop` (rounds), :mod:`.loop_types` (what a
  node hands the kernel and gets back), :mod:`.calls` (running the requested tools) and
  :mod:`.protocol` (tool calls for models without native tool calling);
- the nodes: :mod:`.tool_call` (the ``tool_call`` kind, which also gathers graph,
  builtin, MCP and workflow tools) and :mod:`.node` (the ``agent`` kind) with its
  planning (:mod:`.plan`) and risk policy (:mod:`.policy`);
- the tool sources: :mod:`.builtin_tools` (account-free utilities) and :mod:`.mcp_tools`
  (MCP servers). They live here because the tool-loop nodes are what offers them to a
  model; the ``code`` node runs a builtin tool directly only for imported Dify tool nodes,
  and the CLI lists MCP tools for the same nodes.

The modules are imported by name (``from nodes.agent.loop import run_agent_loop``); this
package re-exports nothing, so importing it loads no node.
"""
