"""``POST /v1/workflows/import`` and the code sandbox's packages: the answer lists every
package the code imports, installed or not, with the operator's install commands; a
code node whose package is missing is a 422 whose message gives the command; once the
package is in the environment (laid out by the test), the same file imports."""

from __future__ import annotations

import json

from tests.support.packages import environment

FLOW = {
    "nodes": [
        {"nodeId": "start", "flowNodeType": "workflowStart", "inputs": [], "outputs": []},
        {
            "nodeId": "c",
            "flowNodeType": "code",
            "inputs": [
                {"key": "codeType", "value": "py"},
                {
                    "key": "code",
                    "value": "import tidy_text\n\ndef main():\n    return {'out': tidy_text.VERSION}\n",
                },
            ],
            "outputs": [{"id": "out", "key": "out", "type": "dynamic", "valueType": "string"}],
        },
    ],
    "edges": [
        {
            "source": "start",
            "target": "c",
            "sourceHandle": "start-source-right",
            "targetHandle": "c-target-left",
        }
    ],
}


async def test_the_import_answer_lists_packages_and_the_install_command(api):
    source = json.dumps(FLOW)
    refused = await api.client.post(
        "/v1/workflows/import", json={"source": source, "workflow_id": "tidy"}, headers=api.auth()
    )
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["error"]["message"].endswith(
        "its code needs packages the operator must install first: flowloom sandbox install tidy-text"
    )
    assert [p["code"] for p in body["error"]["problems"]] == ["missing_package"]
    partial = await api.client.post(
        "/v1/workflows/import",
        headers=api.auth(),
        json={"source": source, "workflow_id": "tidy", "allow_partial": True},
    )
    assert partial.status_code == 200, partial.text
    assert partial.json()["packages"] == [
        {
            "language": "python",
            "module": "tidy_text",
            "requirement": "tidy-text",
            "installed": False,
            "nodes": ["c"],
        }
    ]
    assert partial.json()["install_commands"] == ["flowloom sandbox install tidy-text"]
    environment(api.settings.home, {"tidy_text": "VERSION = '1.0'\n"})
    imported = await api.client.post(
        "/v1/workflows/import", json={"source": source, "workflow_id": "tidy"}, headers=api.auth()
    )
    assert imported.status_code == 200, imported.text
    assert imported.json()["packages"][0]["installed"] is True and imported.json()["install_commands"] == []
    assert next(n for n in imported.json()["workflow"]["nodes"] if n["id"] == "c")["type"] == "code"
