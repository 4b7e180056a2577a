"""How people reach Flowloom: the command line (:mod:`api.cli`) and the wiring of the
run service from settings (:mod:`api.composition`). The HTTP API joins them here."""
