"""The ``http_request`` node and the address guard every outbound request of Flowloom uses.

:mod:`.request` is the node and its address guard, which refuses loopback, private,
link-local and other special addresses (after DNS resolution, on every connection) unless
``FLOWLOOM_HTTP_ALLOW`` allows them. MCP servers, a tenant's model endpoints and the model
probe go through the same guard.

The modules are imported by name; this package re-exports nothing.
"""
