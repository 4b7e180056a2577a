"""``GET /v1/node-kinds``: every kind's description (and its translations) is plain text
for builders - one line, no reST markup, no pointers into the code."""

from __future__ import annotations


async def test_every_node_kind_description_reads_as_plain_user_facing_text(api):
    kinds = (await api.client.get("/v1/node-kinds", headers=api.auth())).json()["kinds"]
    assert len(kinds) > 15
    texts = [(k["kind"], k["description"]) for k in kinds]
    texts += [(f"{k['kind']} [{lang}]", label["description"]) for k in kinds for lang, label in k["labels"].items()]
    for kind, text in texts:
        assert text and text == " ".join(text.split()), (kind, text)
        for marker in (":class:", "``", "docstring", ":func:", ":meth:"):
            assert marker not in text, (kind, text)
    by_kind = dict(texts)
    assert "else else" not in by_kind["if_else"].replace("``", "")
