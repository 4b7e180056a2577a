"""Knowledge bases in the engine: the ports (:mod:`engine.knowledge.ports`), ingestion
(:mod:`engine.knowledge.ingest`: parse, split, diff against what is stored, embed what
changed, resumable after a crash), retrieval (:mod:`engine.knowledge.retrieval`: recall
passes, fusion, rerank, quote budget, citations) and the service the API, the CLI and
nodes use (:mod:`engine.knowledge.service`)."""
