"""examples/word_stats.json: iteration over items with a sandboxed Python code node per item,
then a JavaScript code node summing the results - through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_word_stats_runs_code_per_item_and_sums_in_javascript():
    sentences = ["The quick brown fox jumps.", "Sandboxes keep secrets safe!", "", "Loops run per item."]
    proc = subprocess.run([sys.executable, "-m", "api.cli", "run", str(ROOT / "examples" / "word_stats.json"), "--json",
                           "--input", f"sentences={json.dumps(sentences)}"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    final = events[-1]
    assert final["type"] == "run_finished"
    assert final["answer"] == "4 sentences, 13 words; longest word: Sandboxes"
    assert [r["words"] for r in final["outputs"]["per_sentence"]] == [5, 4, 0, 4]
    code_runs = [e for e in events if e["type"] == "node_finished" and e["node_id"] == "stats"]
    assert sorted(e["iteration"] for e in code_runs) == [0, 1, 2, 3]
