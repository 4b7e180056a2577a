"""The node runs the scheduler builds without validation equal pydantic's validated ones.

:meth:`NodeRun.started` and :meth:`NodeRun.skipped` lay out an instance by hand (the
engine opens one per node of every run); a field added to :class:`NodeRun`, or a change
in how pydantic lays out an instance, must show here rather than as a record that
serialises, compares or copies differently.
"""

from __future__ import annotations

import copy

from schemas.run import NodeRun
from schemas.types import NodeRunStatus


def _same(fast: NodeRun, checked: NodeRun) -> None:
    assert fast == checked
    assert list(fast.__dict__) == list(checked.__dict__) == list(NodeRun.model_fields)
    for name, value in checked.__dict__.items():
        assert type(fast.__dict__[name]) is type(value), name
    assert fast.model_fields_set == checked.model_fields_set
    assert fast.__pydantic_extra__ == checked.__pydantic_extra__
    assert fast.__pydantic_private__ == checked.__pydantic_private__
    assert fast.model_dump() == checked.model_dump()
    assert fast.model_dump(exclude_unset=True) == checked.model_dump(exclude_unset=True)
    assert fast.model_dump_json() == checked.model_dump_json()
    assert repr(fast) == repr(checked)
    assert copy.deepcopy(fast) == checked and fast.model_copy() == checked


def test_started_equals_the_validated_node_run() -> None:
    fast = NodeRun.started("r1:n", "n", "llm", 1700000000.25, 2)
    checked = NodeRun(
        id="r1:n", node_id="n", kind="llm", status=NodeRunStatus.running, started_at=1700000000.25, attempts=2
    )
    _same(fast, checked)


def test_skipped_equals_the_validated_node_run() -> None:
    fast = NodeRun.skipped("r1:n", "n", "answer", 1700000000.5)
    checked = NodeRun(
        id="r1:n",
        node_id="n",
        kind="answer",
        status=NodeRunStatus.skipped,
        started_at=1700000000.5,
        finished_at=1700000000.5,
    )
    _same(fast, checked)


def test_each_fast_node_run_owns_its_containers() -> None:
    one, two = NodeRun.started("r:a", "a", "x", 1.0, 0), NodeRun.started("r:b", "b", "x", 1.0, 0)
    one.inputs["k"] = 1
    one.handles.append("out")
    one.data["given"] = True
    assert two.inputs == {} and two.handles == [] and two.data == {}
    one.status = NodeRunStatus.succeeded  # assignment still goes through pydantic
    assert "status" in one.model_fields_set and one.status is NodeRunStatus.succeeded


def test_field_assignment_does_what_pydantics_does() -> None:
    from pydantic import BaseModel

    from schemas.run import RunState

    for model in (
        NodeRun.started("r:a", "a", "x", 1.0, 0),
        RunState(run_id="r", workflow_id="w", workflow_hash="h"),
    ):
        plain = model.model_copy()
        for name, value in (
            ("status", model.status),
            ("finished_at" if isinstance(model, NodeRun) else "seq", 3),
        ):
            setattr(model, name, value)
            BaseModel.__setattr__(plain, name, value)  # pydantic's own assignment
        assert model.__dict__ == plain.__dict__ and model.model_fields_set == plain.model_fields_set
        for target in (model, plain):  # unknown names: pydantic's error, from pydantic
            try:
                target.not_a_field = 1
            except ValueError as exc:
                assert "object has no field" in str(exc)
            else:  # pragma: no cover
                raise AssertionError("an unknown field was assigned")
    state = RunState(run_id="r", workflow_id="w", workflow_hash="h")
    state.env = {"K": "v"}  # a property, through pydantic
    assert state.env == {"K": "v"} and "env" not in state.__dict__
    child = state.child()
    assert child.__pydantic_private__["_parent"] is state  # type: ignore[index]  # set by child()
