"""Canvas benchmark: a 200-node workflow in the web canvas, in headless Chromium.

Prints exactly one JSON line on stdout (progress, with ``-v``, goes to stderr)::

    python bench/canvas.py             # ~1 minute on 2 cores
    python bench/canvas.py --frames 60 # fewer frames per gesture

Method. ``flowloom serve`` runs as a real process over a temporary ``FLOWLOOM_HOME``,
serving the built canvas (a copy of ``web/dist``: build it first with ``npm --prefix web
run build``; ``web/node_modules`` provides playwright-core), set up by
``tests/web/canvas_env.py``. Two workflows are saved through the API: ``bench200`` (a
start node, 198 template nodes in 9 chained rows fanning out from it, an answer node
joining them: 200 nodes, 207 edges, laid out on a grid) and its peer ``bench3`` (start,
template, answer). For each, ``bench/canvas.mjs`` opens the editor in a fresh browser
context and reports the time from navigation start to the first node in the DOM and to a
settled node count, then frame times (ms between ``requestAnimationFrame`` callbacks,
p50/p95/max over ``--frames`` frames, one mouse step per frame) while the pane is dragged
(panning), while one node is dragged, and while idle (the floor: headless Chromium's own
frame pacing on this machine). The peer tells what is the canvas's size and what is
the browser and machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _checkout import ROOT, machine, provenance

from tests.web.canvas_env import canvas_server, web_prerequisites

SCHEMA = "flowloom-bench-canvas/1"
ROWS, PER_ROW = 9, 22


def big_workflow(workflow_id: str = "bench200") -> dict[str, Any]:
    """start -> 9 rows of 22 chained templates -> answer: 200 nodes on a grid."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start", "position": {"x": 0, "y": ROWS * 75}}]
    edges: list[dict[str, Any]] = []
    for row in range(ROWS):
        previous = "start"
        for col in range(PER_ROW):
            node_id = f"t{row}_{col}"
            nodes.append({"id": node_id, "type": "template", "position": {"x": 300 * (col + 1), "y": 150 * row},
                          "config": {"template": f"row {row} step {col}"}})
            edges.append({"id": f"e_{previous}_{node_id}", "source": previous, "target": node_id})
            previous = node_id
        edges.append({"id": f"e_{previous}_say", "source": previous, "target": "say"})
    nodes.append({"id": "say", "type": "answer", "position": {"x": 300 * (PER_ROW + 1), "y": ROWS * 75},
                  "config": {"text": "done"}})
    return {"id": workflow_id, "name": "Canvas bench (200 nodes)", "version": 1, "inputs": [], "variables": [],
            "nodes": nodes, "edges": edges}


def small_workflow(workflow_id: str = "bench3") -> dict[str, Any]:
    """start -> template -> answer (the peer)."""
    return {"id": workflow_id, "name": "Canvas bench (3 nodes)", "version": 1, "inputs": [], "variables": [],
            "nodes": [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                      {"id": "t", "type": "template", "position": {"x": 300, "y": 0}, "config": {"template": "x"}},
                      {"id": "say", "type": "answer", "position": {"x": 600, "y": 0}, "config": {"text": "done"}}],
            "edges": [{"id": "e1", "source": "start", "target": "t"}, {"id": "e2", "source": "t", "target": "say"}]}


def _measure(url: str, key: str, workflow_id: str, frames: int) -> dict[str, Any]:
    done = subprocess.run(["node", str(Path(ROOT) / "bench" / "canvas.mjs"), url, key, workflow_id, str(frames)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"bench/canvas.mjs failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the benchmark and print its JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=120, help="frames per gesture (default 120)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    missing = web_prerequisites()
    if missing:
        raise SystemExit("cannot run the canvas bench:\n  " + "\n  ".join(missing))
    started = time.perf_counter()
    info = machine()
    with tempfile.TemporaryDirectory(prefix="flowloom-bench-canvas-") as tmp, \
            canvas_server(Path(tmp) / "home") as server:
        headers = {"Authorization": f"Bearer {server.key}"}
        for doc in (big_workflow(), small_workflow()):
            httpx.post(server.url + "/v1/workflows", json=doc, headers=headers, timeout=60).raise_for_status()
        results = {}
        for workflow_id in ("bench200", "bench3"):
            if args.verbose:
                print(f"measuring {workflow_id} ...", file=sys.stderr)
            results[workflow_id] = _measure(server.url, server.key, workflow_id, args.frames)
    chromium = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    big = results["bench200"]
    print(json.dumps({
        "schema": SCHEMA, "nodes": 200, "edges": len(big_workflow()["edges"]), "frames": args.frames,
        "first_render_ms": big["first_node_ms"], "settled_ms": big["settled_ms"], "nodes_in_dom": big["nodes_in_dom"],
        "pan": big["pan"], "drag_node": big["drag"], "idle": big["idle"],
        "peer_3_nodes": results["bench3"],
        "browser": chromium, "node": node, "machine": info, **provenance(("web", "bench/canvas.py", "bench/canvas.mjs")),
        "seconds": round(time.perf_counter() - started, 1),
    }))


if __name__ == "__main__":
    main()
