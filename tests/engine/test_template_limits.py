"""The limits of one template render (engine/template_limits.py): no value it builds is
larger than the cap, all it builds stays under the memory budget, and it stops at its
time budget - whatever construct builds the values. Each refusal names its setting."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from engine import RunDeps, run_workflow
from engine.settings import Settings
from tests.support.catalog import compile_workflow
from tests.support.workflows import build, chain_edges, node

CAP = "max_template_output_bytes"
MEMORY = "max_template_memory_bytes"
SECONDS = "max_template_seconds"

#: a small cap and budget, so that a failure to refuse shows as a large peak
LIMITS = Settings(max_template_output_bytes=1_000_000, max_template_memory_bytes=8_000_000, max_template_seconds=120)

DOUBLING = "{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = NEXT %}{% endfor %}{{ ns.s|length }}"
BIG = "{% set s = 'x' * 900000 %}"


def run_template(template: str, settings: Settings = LIMITS):
    doc = build([node("t", "template", {"template": template})], chain_edges("start", "t"))
    return asyncio.run(run_workflow(compile_workflow(doc), {}, deps=RunDeps(settings=settings)))


def peak_of(template: str, settings: Settings = LIMITS):
    """The run's state and the most memory (bytes) Python held at once while it ran."""
    tracemalloc.start()
    try:
        state = run_template(template, settings)
        return state, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("template, setting", [
    # the namespace doubling found in the attack, verbatim, and the same with every operator
    ("{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
     "{{ ns.s|length }}", CAP),
    (DOUBLING.replace("NEXT", "ns.s + ns.s"), CAP),
    (DOUBLING.replace("NEXT", "ns.s * 2"), CAP),
    (DOUBLING.replace("NEXT", "[ns.s, ns.s] | join"), CAP),
    (DOUBLING.replace("NEXT", "''.join([ns.s, ns.s])"), CAP),
    (DOUBLING.replace("NEXT", "'%s%s' | format(ns.s, ns.s)"), CAP),
    (DOUBLING.replace("NEXT", "'{}{}'.format(ns.s, ns.s)"), CAP),
    (DOUBLING.replace("NEXT", "'%s%s' % (ns.s, ns.s)"), CAP),
    ("{% set ns = namespace(l=['x']) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
     "{{ ns.l|length }}", CAP),
    ("{% set ns = namespace(l=['x']) %}{% for i in range(30) %}{% set ns.l = ns.l * 2 %}{% endfor %}"
     "{{ ns.l|length }}", CAP),
    ("{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}{% endfor %}{{ 1 }}",
     "at most 4300"),
    # one value printed or joined many times: small as a list, huge as text
    (BIG + "{{ [s] * 1000 }}", CAP),
    (BIG + "{{ ([s] * 1000) | join(',') }}", CAP),
    (BIG + "{{ ([s] * 1000) | map('string') | join }}", CAP),
    (BIG + "{{ ','.join([s] * 1000) }}", CAP),
    (BIG + "{{ ([s] * 1000) | tojson }}", CAP),
    (BIG + "{{ '%s' % ([s] * 1000,) }}", CAP),
    (BIG + "{{ '{0}{0}{0}{0}{0}{0}{0}{0}'.format(s) }}", CAP),
    (BIG + "{{ namespace(l=[s] * 100) }}", CAP),
    (BIG + "{{ {'a': [s] * 100}.values() }}", CAP),
    ("{{ [[[[1]]]] | tojson(indent=3000000) }}", CAP),
    # growth one small step at a time: a list grown by append in loops, a dict by update,
    # copies kept in a list, printed pieces collected in a block
    ("{% set l = [] %}{% for i in range(100000) %}{% for j in range(100) %}{% set _ = l.append('x' * 1000) %}"
     "{% endfor %}{% endfor %}{{ l|length }}", MEMORY),
    ("{% set d = {} %}{% for i in range(100000) %}{% for j in range(100) %}{% set _ = d.update({i ~ '-' ~ j: 'x' * 1000}) %}"
     "{% endfor %}{% endfor %}{{ d|length }}", MEMORY),
    (BIG + "{% set l = [] %}{% for i in range(1000) %}{% set _ = l.append(s[i:]) %}{% endfor %}{{ l|length }}", MEMORY),
    (BIG + "{% set x %}{% for i in range(1000) %}{{ s }}{% endfor %}{% endset %}{{ x|length }}", MEMORY),
    # filters and methods that grow their input by an argument, widths and precisions included
    ("{{ '%.300000000f' % 1.0 }}", CAP),
    ("{{ '{:.300000000f}'.format(1.0) }}", CAP),
    ("{{ '%*s' % (300000000, 'x') }}", CAP),
    ("{{ '{:{w}}'.format('x', w=300000000) }}", CAP),
    ("{{ ('x\n' * 400000) | indent(1000) | length }}", CAP),
    ("{{ ('\t' * 400000).expandtabs(1000) | length }}", CAP),
    ("{{ ('xy\n' * 300000).split('\n') | length }}", CAP),
    ("{{ [1] | batch(1000000000, 'x') | list | length }}", CAP),
    ("{{ lipsum(100000) | length }}", CAP),
])
def test_every_value_a_render_builds_is_capped_and_memory_stays_bounded(template, setting):
    state, peak = peak_of(template)
    assert state.status == "failed" and state.error.node_id == "t"
    assert state.error.reason == "output_too_large", state.error
    assert setting in state.error.message, state.error.message
    assert peak < 48_000_000, f"the run held {peak} bytes at once"


@pytest.mark.parametrize("template", [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}{% endset %}",
])
def test_a_render_stops_at_its_time_budget_naming_it(template):
    state = run_template(template, Settings(max_template_seconds=0.3))
    assert state.status == "failed" and state.error.reason == "template_timeout", state.error
    assert SECONDS in state.error.message and "0.3 s" in state.error.message


def test_text_accumulated_in_a_namespace_is_counted_once_not_at_every_step():
    """``ns.s = ns.s ~ x`` replaces the namespace's only reference: the old string is given
    back, so building 600 kB this way passes a budget its 3000 steps (900 MB) could not."""
    template = ("{% set ns = namespace(s='', l=[]) %}{% for i in range(3000) %}{% set ns.s = ns.s ~ ('y' * 200) %}"
                "{% endfor %}{{ ns.s|length }} {{ ns.l|length }}")
    state = run_template(template)
    assert state.status == "succeeded", state.error
    assert state.node_runs["t"].outputs == {"output": "600000 0"}
    # the same strings also kept in a list are all held, and counted
    kept = template.replace("{% endfor %}", "{% set _ = ns.l.append(ns.s) %}{% endfor %}")
    state = run_template(kept)
    assert state.status == "failed" and MEMORY in state.error.message, state.error
    # a literal list put in a namespace was never charged: overwriting it gives nothing back
    literal = ("{% set ns = namespace(l=[]) %}{% set kept = [] %}{% for i in range(100000) %}"
               "{% set ns.l = [" + ", ".join(["i"] * 64) + "] %}"
               "{% set _ = kept.append('x' * 100) %}{% endfor %}")
    state = run_template(literal)
    assert state.status == "failed" and MEMORY in state.error.message, state.error


def test_lists_and_objects_grown_one_item_at_a_time_are_charged_for_the_items_only():
    template = ("{% set l = [] %}{% set d = {} %}{% for i in range(20000) %}{% set _ = l.append(i) %}"
                "{% set _ = d.update({i: i}) %}{% endfor %}{{ l|length }} {{ d|length }}")
    state = run_template(template)
    assert state.status == "succeeded", state.error
    assert state.node_runs["t"].outputs == {"output": "20000 20000"}


def test_ordinary_templates_render_as_before():
    template = ("{% set ns = namespace(total=0) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}"
                "{% endfor %}{{ ns.total }}|{{ ['a', 'b'] | join(', ') }}|{{ 'ab' ~ 1 }}|{{ '%.1f' | format(2) }}"
                "|{{ '{}-{}'.format('x', 2) }}|{{ ('abc' * 2)[1:4] }}|{{ [1, 2] + [3] }}|{{ 2 ** 10 }}"
                "|{{ [[1], [2]] | sum(start=[]) }}|{{ {'k': [1, None, true]} }}|{% for a, b in {'p': 1}.items() %}"
                "{{ a }}={{ b }}{% endfor %}|{{ range(3) | list | length }}{% for i in range(2) %}{{ loop.length }}"
                "{% endfor %}")
    state = run_template(template)
    assert state.status == "succeeded", state.error
    assert state.node_runs["t"].outputs == {
        "output": '6|a, b|ab1|2.0|x-2|bca|[1, 2, 3]|1024|[1, 2]|{"k": [1, null, true]}|p=1|322'}
