"""Embeddings and rerank clients against the scripted OpenAI-compatible server (real SDK, real HTTP)."""

from __future__ import annotations

import base64
import math
import struct

import pytest

from engine.knowledge.ports import DimensionMismatch, EmbeddingError, RerankError
from nodes.knowledge.embeddings import RegistryEmbedder, RegistryReranker, _vector
from nodes.llm.model_registry import ModelRegistry, ModelSpec, UnknownModel, WrongModelType
from tests.support.openai_server import embed_text, http_error, rate_limited


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_batches_return_vectors_in_order_with_usage_and_cost(openai_server, scripted_registry):
    embedder = RegistryEmbedder(scripted_registry)
    texts = [f"text number {i}" for i in range(150)]
    batch = await embedder.embed("embed-model", texts)
    assert len(batch.vectors) == 150 and {len(v) for v in batch.vectors} == {32}
    assert batch.vectors[7] == pytest.approx(embed_text("text number 7", 32))
    assert openai_server.embedding_calls == 3  # max_batch 64 texts per request
    assert batch.tokens == 150 * 3 and batch.cost == pytest.approx(450 * 0.0001 / 1000)
    assert sum(openai_server.embedded.values()) == 150
    bodies = [r.body for r in openai_server.requests if r.path == "/v1/embeddings"]
    assert {b["model"] for b in bodies} == {"embed-dim32"} and {b["encoding_format"] for b in bodies} == {"base64"}


async def test_a_server_ignoring_base64_is_read_as_floats(openai_server, scripted_registry):
    openai_server.embedding_floats_only = True  # Ollama, llama.cpp
    batch = await RegistryEmbedder(scripted_registry).embed("embed-model", ["alpha beta", "gamma"])
    assert [b["encoding_format"] for b in (r.body for r in openai_server.requests)] == ["base64"]
    assert batch.vectors[1] == pytest.approx(embed_text("gamma", 32))
    assert all(type(x) is float for x in batch.vectors[0])


@pytest.mark.parametrize("answer", ["AAAAAAA=", "not base64!", base64.b64encode(struct.pack("<2f", 1.0, math.nan)).decode(),
                                    "", [], [1.0, "x"], None])
def test_malformed_or_non_finite_vectors_are_embedding_errors(answer):
    with pytest.raises(EmbeddingError, match="embedding model 'm' answered a"):
        _vector("m", answer)


def test_base64_vectors_are_little_endian_float32():
    assert _vector("m", base64.b64encode(struct.pack("<3f", 0.5, -1.0, 2.0)).decode()) == [0.5, -1.0, 2.0]
    assert _vector("m", [1, 2.5]) == [1.0, 2.5]


async def test_similar_texts_are_near():
    near = cosine(embed_text("install flowloom on linux", 64), embed_text("how to install flowloom on linux", 64))
    far = cosine(embed_text("install flowloom on linux", 64), embed_text("pandas eat bamboo", 64))
    assert near > 0.8 and near > far + 0.4


async def test_transient_failures_are_retried_and_the_last_one_names_the_model(openai_server, scripted_registry):
    embedder = RegistryEmbedder(scripted_registry, retries=2, backoff_s=0.01)
    openai_server.script_embeddings(rate_limited(), http_error(503, "overloaded"))
    assert len((await embedder.embed("embed-model", ["a b"])).vectors) == 1
    assert openai_server.embedding_calls == 3
    openai_server.script_embeddings(*[http_error(500, "boom")] * 3)
    with pytest.raises(EmbeddingError, match=r"embedding model 'embed-model' failed after 3 attempts: HTTP 500"):
        await embedder.embed("embed-model", ["a b"])
    openai_server.script_embeddings(http_error(400, "bad input"))
    with pytest.raises(EmbeddingError, match="HTTP 400"):
        await embedder.embed("embed-model", ["a b"])
    assert openai_server.embedding_calls == 7  # a 400 is not retried


async def test_connection_refused_is_an_embedding_error(openai_server, scripted_registry):
    openai_server.stop()
    embedder = RegistryEmbedder(scripted_registry, retries=1, backoff_s=0.01)
    with pytest.raises(EmbeddingError, match="embedding model 'embed-model' failed after 2 attempts") as caught:
        await embedder.embed("embed-model", ["x"])
    # the endpoint tried, as chat errors name it: a local server not running, or a base URL without /v1
    assert f"(URL tried: {openai_server.base_url.rstrip('/')}/embeddings)" in str(caught.value)


async def test_a_model_answering_another_dimension_is_a_dimension_mismatch(openai_server, scripted_registry):
    openai_server.embedding_dims["embed-dim32"] = 16
    with pytest.raises(DimensionMismatch, match="embed-model"):
        await RegistryEmbedder(scripted_registry).embed("embed-model", ["x"])


async def test_chat_models_are_not_embedding_models_and_back(scripted_registry):
    embedder = RegistryEmbedder(scripted_registry)
    assert embedder.has_model("embed-model") and not embedder.has_model("tools-model")
    assert embedder.names() == ["embed-model", "embed-model-2"]
    with pytest.raises(EmbeddingError, match="'tools-model' is a chat model, not an embedding model"):
        await embedder.embed("tools-model", ["x"])
    assert not scripted_registry.has("embed-model") and "embed-model" not in scripted_registry.names()
    with pytest.raises(WrongModelType, match="'embed-model' is an embedding model, not a chat model"):
        scripted_registry.get("embed-model")
    with pytest.raises(UnknownModel):
        scripted_registry.get("rerank-model")
    with pytest.raises(ValueError, match="max_output_tokens is required for a chat model"):
        ModelSpec(name="c", provider="p", max_context=100)


def test_bundled_registry_has_embedding_and_rerank_models_with_prices():
    from nodes.llm.model_registry import load_registry

    registry: ModelRegistry = load_registry(env={})
    assert {"text-embedding-3-small", "bge-m3"} <= set(registry.names("embedding"))
    assert "bge-reranker" in registry.names("rerank")
    assert registry.get("text-embedding-3-small", "embedding").pricing.input_per_1k > 0
    assert registry.get("text-embedding-3-small", "embedding").dimension == 1536
    assert not set(registry.names()) & set(registry.names("embedding"))


async def test_rerank_scores_best_first_and_honours_top_n(openai_server, scripted_registry):
    reranker = RegistryReranker(scripted_registry, backoff_s=0.01)
    ranked, tokens = await reranker.rerank("rerank-model", "pandas eat bamboo",
                                           ["rockets burn fuel", "pandas eat bamboo shoots", "pandas sleep"], top_n=2)
    assert ranked == [(1, 1.0), (2, pytest.approx(1 / 3, abs=1e-5))] and tokens > 0
    body = [r.body for r in openai_server.requests if r.path == "/v1/rerank"][0]
    assert body == {"model": "rerank-v1", "query": "pandas eat bamboo", "top_n": 2,
                    "documents": ["rockets burn fuel", "pandas eat bamboo shoots", "pandas sleep"]}
    assert openai_server.requests[-1].headers["authorization"].startswith("Bearer sk-test")
    openai_server.script_embeddings(rate_limited())
    assert (await reranker.rerank("rerank-model", "a", ["a"]))[0] == [(0, 1.0)]
    with pytest.raises(RerankError, match="'embed-model' is an embedding model, not a rerank model"):
        await reranker.rerank("embed-model", "q", ["d"])
    openai_server.script_embeddings(http_error(400, "no documents"))
    with pytest.raises(RerankError, match="rerank"):
        await reranker.rerank("rerank-model", "a", ["a"])


def test_a_chat_node_naming_an_embedding_model_does_not_compile(scripted_registry):
    from engine import compile_workflow
    from engine.errors import CompileError
    from nodes import builtin_catalog

    doc = {"id": "wf", "nodes": [{"id": "start", "type": "start"},
                                 {"id": "chat", "type": "chat", "config": {"model": "embed-model", "user_prompt": "hi"}},
                                 {"id": "answer", "type": "answer", "config": {"text": "{{ chat.text }}"}}],
           "edges": [{"id": "e1", "source": "start", "target": "chat"}, {"id": "e2", "source": "chat", "target": "answer"}]}
    with pytest.raises(CompileError) as info:
        compile_workflow(doc, catalog=builtin_catalog(), models=scripted_registry, use_cache=False)
    [problem] = [p for p in info.value.problems if p.code == "unknown_model"]
    assert problem.node_id == "chat" and problem.path == "config.model" and "'embed-model'" in problem.message
    assert "embed-model," not in problem.message  # the known models listed are chat models


async def test_a_token_budget_splits_requests_too(openai_server, scripted_registry):
    embedder = RegistryEmbedder(scripted_registry, token_budget=30)
    texts = ["word " * 40, "short one", "short two", "word " * 10]  # ~50, 3, 3, ~13 estimated tokens
    batch = await embedder.embed("embed-model", texts)
    assert len(batch.vectors) == 4
    inputs = [r.body["input"] for r in openai_server.requests if r.path == "/v1/embeddings"]
    assert inputs == [[texts[0]], texts[1:]]  # the oversized text alone, the rest within the budget


async def test_held_requests_dropped_are_retried_and_only_answers_count(openai_server, scripted_registry):
    import asyncio

    embedder = RegistryEmbedder(scripted_registry, retries=2, backoff_s=0.01)
    openai_server.hold_embeddings()
    task = asyncio.create_task(embedder.embed("embed-model", ["held text"]))
    await asyncio.to_thread(openai_server.wait_held, 1)
    assert openai_server.embedded["held text"] == 0
    openai_server.drop_embeddings()  # the connection closes with no answer: a transient failure
    assert len((await asyncio.wait_for(task, 10)).vectors) == 1
    assert openai_server.embedding_texts == ["held text", "held text"]
    assert openai_server.embedded["held text"] == 1


async def test_latency_of_the_scripted_server(openai_server, scripted_registry):
    import time

    openai_server.embedding_latency = 0.3
    started = time.monotonic()
    await RegistryEmbedder(scripted_registry).embed("embed-model", ["x"])
    assert time.monotonic() - started >= 0.3
