"""Services that live beside the engine: node memory stores (and later run workers)."""
