"""nodes/agent/policy.py: declared risk (unknown counts as write), the workflow's allow
list, and the confirm interrupt's payload and answers."""

from __future__ import annotations

import pytest

from nodes.agent.policy import (
    Risk,
    RiskPolicy,
    confirm_payload,
    declared_risk,
    parse_confirmation,
    rejection_message,
)


@pytest.mark.parametrize("value, risk", [
    ("read", Risk.read), ("READ", Risk.read), ("read_only", Risk.read), ("low", Risk.read),
    ("write", Risk.write), (None, Risk.write), ("", Risk.write), ("medium", Risk.write), ("reed", Risk.write),
    (3, Risk.write), (Risk.read, Risk.read),
])
def test_declared_risk_unknown_counts_as_write(value, risk):
    assert declared_risk(value) is risk


def test_policy_confirms_write_tools_unless_allowed():
    strict = RiskPolicy.from_config(False)
    assert not strict.needs_confirmation("search", "read")
    assert strict.needs_confirmation("book", "write")
    assert strict.needs_confirmation("mystery", None), "an undeclared level is a write"
    assert not RiskPolicy.from_config(True).needs_confirmation("book", "write")
    named = RiskPolicy.from_config(["book"])
    assert not named.needs_confirmation("book", "write")
    assert named.needs_confirmation("cancel_booking", "write")
    assert RiskPolicy.from_config(None) == strict


def test_confirm_payload_names_the_tool_and_arguments():
    payload = confirm_payload("book_hotel", '{"city": "Paris", "nights": 2}', "books a room", error="say yes or no")
    assert payload["tool"] == "book_hotel" and payload["risk"] == "write"
    assert payload["arguments"] == '{"city": "Paris", "nights": 2}'
    assert "'book_hotel' (books a room)" in payload["question"]
    assert [o["id"] for o in payload["options"]] == ["approve", "reject"]
    assert payload["error"] == "say yes or no"
    long = confirm_payload("t", {"text": "x" * 2000})
    assert long["arguments"].endswith("…") and len(long["arguments"]) <= 801


@pytest.mark.parametrize("answer, decision", [
    ("approve", True), ("Yes", True), ("Allow this call", True), ("确认", True), (" OK. ", True), (True, True),
    ({"id": "approve"}, True),
    ("reject", False), ("no", False), ("Do not run it", False), ("拒绝", False), (False, False),
    ("maybe", None), ("", None), (7, None),
])
def test_parse_confirmation(answer, decision):
    assert parse_confirmation(answer) is decision


def test_rejection_message_tells_the_model_to_go_on():
    text = rejection_message("book_hotel")
    assert "'book_hotel'" in text and "not executed" in text
