"""The depth cap of workflow documents: the level walk finds exactly the documents nested
deeper than ``max_document_depth``, and names a container that is."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.documents import _too_deep_at

_leaf = st.one_of(st.none(), st.integers(), st.text(max_size=2), st.tuples(st.integers()))
_values = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=2), inner, max_size=3),
    ),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    """Levels of non-empty dicts and lists (the document itself is level 1; tuples do not nest)."""
    items = value.values() if isinstance(value, dict) else value
    inner = [_depth(item) for item in items if isinstance(item, (dict, list)) and item]
    return 1 + max(inner, default=0)


def _at(doc: dict[str, Any], path: str) -> Any:
    """The value at ``a.b[0].c`` (keys here hold no dots nor brackets)."""
    value: Any = doc
    for part in path.replace("[", ".[").split("."):
        if part:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=2), _values, max_size=4), st.integers(1, 6)
)
def test_a_document_is_too_deep_exactly_when_nested_beyond_the_cap(doc: dict[str, Any], cap: int) -> None:
    found = _too_deep_at(doc, cap)
    assert (found is not None) == (_depth(doc) > cap)
    # the level walk alone (a large document's way) and the small-document walk with a
    # budget that runs out part way agree with it
    for small in (0, 1, 3):
        assert (_too_deep_at(doc, cap, small) is None) == (found is None)
    if found is not None and found.path is not None:
        # the named container sits at level cap + 1
        assert isinstance(_at(doc, found.path), (dict, list))
