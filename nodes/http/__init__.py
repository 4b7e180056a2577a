"""The ``http_request`` node and the address guard every outbound request of Flowloom uses.

- :mod:`.request`: the ``http_request`` kind (one HTTP call with httpx);
- :mod:`.guard`: the address guard (SSRF guard), which refuses loopback, private,
  link-local and other special addresses - after DNS resolution, on every connection -
  unless ``FLOWLOOM_HTTP_ALLOW`` allows them. MCP servers and a tenant's model endpoints
  (listing, probing, runs) go through the same guard.

The modules are imported by name; this package re-exports nothing.
"""
