"""The ``code`` node and the sandbox it runs user code in.

- the node: :mod:`.code` (the ``code`` kind) and :mod:`.compat` (FastGPT's code-node
  conventions, also read by the importers);
- the sandbox: :mod:`.process` (:func:`~nodes.sandbox.process.run_code`: one isolated,
  resource-limited child process per run), :mod:`.argv` (the ``bwrap`` command line),
  :mod:`.seccomp` (the system-call filter) and :mod:`.runners` (the child-side programs);
- :mod:`.packages`: the operator's Python and npm packages the sandbox mounts read-only
  (``flowloom sandbox install``).

The modules are imported by name; this package re-exports nothing.
"""
