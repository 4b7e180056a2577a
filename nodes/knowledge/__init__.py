"""Knowledge bases on the nodes side: reading uploads (:mod:`.parsing`), splitting them
into chunks (:mod:`.chunking`) and the embeddings and rerank clients of the model
registry (:mod:`.embeddings`) - the implementations of the engine's knowledge ports."""
