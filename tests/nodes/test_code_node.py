"""Code node (nodes/sandbox/code.py, nodes/sandbox/process.py): Python and JavaScript in the bubblewrap sandbox.

Every test runs workflows through the real engine, and the code through the real
sandbox (bwrap, seccomp, setpriv/prlimit): nothing is mocked. They need bubblewrap
(``.ci/run`` installs it) and Node.js; a machine without them fails these tests
instead of skipping them, because a skipped sandbox test proves nothing.

Network rule: the only address any test touches is 127.0.0.1 (its own listener).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine import CancelToken, RunDeps, new_run_state, run_workflow
from engine.errors import CompileError
from engine.settings import Settings
from nodes.sandbox import argv, process
from tests.support.catalog import compile_workflow
from tests.support.workflows import build, chain_edges, node

#: Explicit settings: independent of FLOWLOOM_* variables in the environment.
SANDBOXED = Settings(code_sandbox="bwrap", allow_unsandboxed_code=False, code_bwrap="bwrap", code_node="node")
MISSING_BWRAP = "/nonexistent/flowloom-test/bwrap"
#: The whole environment code may see: fixed values, never the engine's.
CODE_ENV = {"PATH", "HOME", "LANG", "PWD", "NODE_PATH", *argv.THREAD_CAPS}
REPO = Path(__file__).resolve().parents[2]


def code_node(language: str, code: str, *, outputs: dict[str, str] | None = None,
              inputs: list[dict[str, Any]] | None = None, **config: Any) -> dict[str, Any]:
    return node("code", "code", {
        "language": language,
        "code": code,
        "inputs": inputs or [],
        "outputs": [{"name": k, "type": v} for k, v in (outputs or {}).items()],
        **config,
    })


def doc_for(code_cfg: dict[str, Any], input_vars: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return build([code_cfg], chain_edges("start", "code"), inputs=input_vars or [])


async def run_code_node(language: str, code: str, *, settings: Settings = SANDBOXED,
                        run_inputs: dict[str, Any] | None = None, input_vars: list[dict[str, Any]] | None = None,
                        **kw: Any):
    plan = compile_workflow(doc_for(code_node(language, code, **kw), input_vars))
    state = await run_workflow(plan, run_inputs or {}, deps=RunDeps(settings=settings))
    return state, state.node_runs["code"]


def succeeded(state, run) -> dict[str, Any]:
    assert state.status == "succeeded", (state.error, run.error, run.data)
    assert run.data["sandbox"] == "bwrap", run.data  # the sandbox was really used
    return run.outputs


def failed(state, run, reason: str) -> str:
    assert state.status == "failed", (state.status, run.outputs)
    assert run.status == "failed"
    assert run.error is not None and run.error.type == "NodeFailed", run.error
    assert run.error.reason == reason, (run.error.reason, run.error.message)
    return run.error.message


# --------------------------------------------------------------------- outputs


NUMBERS = [{"name": "a", "type": "number"}, {"name": "b", "type": "number"}]
TYPED = {"total": "number", "half": "number", "label": "string", "big": "boolean", "items": "array", "meta": "object"}


async def test_python_computes_typed_outputs_from_inputs():
    code = (
        "def main(a, b):\n"
        "    print('adding', a, b)\n"
        "    return {'total': a + b, 'half': (a + b) / 2, 'label': f'{a}+{b}',\n"
        "            'big': a + b > 10, 'items': [a, b], 'meta': {'a': a}, 'extra': 1}\n"
    )
    state, run = await run_code_node(
        "python", code, outputs=TYPED, input_vars=NUMBERS, run_inputs={"a": 3, "b": 4},
        inputs=[{"name": "a", "value": {"ref": "inputs.a"}, "type": "number"},
                {"name": "b", "value": {"ref": "inputs.b"}, "type": "number"}])
    out = succeeded(state, run)
    assert out == {"total": 7, "half": 3.5, "label": "3+4", "big": False, "items": [3, 4], "meta": {"a": 3}}
    assert type(out["total"]) is int and type(out["half"]) is float  # numbers stay numbers
    assert run.data["stdout"] == "adding 3 4\n"
    assert run.data["ignored_outputs"] == ["extra"]
    assert run.inputs == {"a": 3, "b": 4}


async def test_javascript_computes_typed_outputs_from_inputs():
    code = (
        "function main(inputs) {\n"
        "  console.log('adding', inputs.a, inputs.b);\n"
        "  const total = inputs.a + inputs.b;\n"
        "  return {total, half: total / 2, label: `${inputs.a}+${inputs.b}`, big: total > 10,\n"
        "          items: [inputs.a, inputs.b], meta: {a: inputs.a}};\n"
        "}\n"
    )
    state, run = await run_code_node(
        "javascript", code, outputs=TYPED, input_vars=NUMBERS, run_inputs={"a": 3, "b": 4},
        inputs=[{"name": "a", "value": {"ref": "inputs.a"}, "type": "number"},
                {"name": "b", "value": {"ref": "inputs.b"}, "type": "number"}])
    out = succeeded(state, run)
    assert out == {"total": 7, "half": 3.5, "label": "3+4", "big": False, "items": [3, 4], "meta": {"a": 3}}
    assert type(out["total"]) is int and type(out["half"]) is float
    assert run.data["stdout"] == "adding 3 4\n"


async def test_javascript_fastgpt_style_destructuring_and_async_main():
    fastgpt = "function main({a, b}) {\n  return {sum: a + b, joined: [a, b].join('-')}\n}\n"
    state, run = await run_code_node("javascript", fastgpt, outputs={"sum": "number", "joined": "string"},
                                     inputs=[{"name": "a", "value": 2}, {"name": "b", "value": 40}])
    assert succeeded(state, run) == {"sum": 42, "joined": "2-40"}

    async_main = "async function main({x}) {\n  await new Promise(r => setTimeout(r, 10));\n  return {y: x * 2};\n}\n"
    state, run = await run_code_node("javascript", async_main, outputs={"y": "number"},
                                     inputs=[{"name": "x", "value": 21}])
    assert succeeded(state, run) == {"y": 42}


async def test_outputs_flow_to_downstream_nodes():
    doc = build([code_node("python", "def main(n):\n    return {'double': n * 2}\n", outputs={"double": "number"},
                           inputs=[{"name": "n", "value": {"ref": "inputs.n"}, "type": "number"}]),
                 node("end", "end", {"outputs": [{"name": "result", "value": {"ref": "code.double"},
                                                  "type": "number"}]})],
                chain_edges("start", "code", "end"), inputs=[{"name": "n", "type": "number"}])
    state = await run_workflow(compile_workflow(doc), {"n": 21}, deps=RunDeps(settings=SANDBOXED))
    assert state.status == "succeeded", state.error
    assert state.outputs == {"result": 42}


@pytest.mark.parametrize("language, code", [
    ("python", "def main():\n    return {'other': 1}\n"),
    ("javascript", "function main() { return {other: 1}; }"),
])
async def test_missing_output_key_names_the_key(language, code):
    state, run = await run_code_node(language, code, outputs={"answer": "string"})
    message = failed(state, run, "code_output")
    assert "'answer'" in message and "did not return it" in message and "other" in message


@pytest.mark.parametrize("language, code", [
    ("python", "def main():\n    return {'answer': '42'}\n"),
    ("javascript", "function main() { return {answer: '42'}; }"),
])
async def test_wrong_output_type_names_the_key(language, code):
    state, run = await run_code_node(language, code, outputs={"answer": "number"})
    message = failed(state, run, "code_output")
    assert "'answer' must be number, got string" in message


@pytest.mark.parametrize("language, code, expected", [
    ("python", "def main():\n    return {'s': {1, 2}}\n", "not JSON-serialisable"),
    ("python", "def main():\n    return {'x': float('nan')}\n", "not JSON-serialisable"),
    ("python", "def main():\n    return [1, 2]\n", "must return a dict"),
    ("javascript", "function main() { return {f: () => 1}; }", "not JSON-serialisable"),
    ("javascript", "function main() { return {u: undefined}; }", "not JSON-serialisable"),
    ("javascript", "function main() { return {n: 1 / 0}; }", "not JSON-serialisable"),
    ("javascript", "function main() { return 5; }", "must return an object"),
])
async def test_outputs_must_be_a_json_object(language, code, expected):
    state, run = await run_code_node(language, code, outputs={})
    assert expected in failed(state, run, "code_output")


# ---------------------------------------------------------------------- errors


async def test_python_exception_shows_only_the_user_traceback():
    code = (
        "def helper(x):\n"
        "    return 10 / x\n"
        "\n"
        "def main():\n"
        "    return {'v': helper(0)}\n"
    )
    state, run = await run_code_node("python", code, outputs={"v": "number"})
    message = failed(state, run, "code_error")
    assert message.startswith("Python code raised ZeroDivisionError: division by zero (in main)")
    assert 'File "<code>", line 5, in main' in message
    assert 'File "<code>", line 2, in helper' in message
    assert "return 10 / x" in message  # the user's source line
    # Only the user's frames: no runner, sandbox or engine file appears.
    frames = [line for line in message.splitlines() if line.strip().startswith("File ")]
    assert frames and all('"<code>"' in line for line in frames), frames
    for internal in ("sandbox", "_runner", "site-packages", "asyncio", str(REPO)):
        assert internal not in message
    assert run.data["error"]["type"] == "ZeroDivisionError"


async def test_javascript_exception_shows_only_the_user_stack():
    code = (
        "function helper(x) {\n"
        "  throw new TypeError('bad ' + x);\n"
        "}\n"
        "function main() {\n"
        "  return {v: helper(1)};\n"
        "}\n"
    )
    state, run = await run_code_node("javascript", code, outputs={"v": "number"})
    message = failed(state, run, "code_error")
    assert message.startswith("JavaScript code raised TypeError: bad 1 (in main)")
    assert "at helper (<code>:2:9)" in message and "at main (<code>:5:" in message
    frames = [line for line in message.splitlines() if line.strip().startswith("at ")]
    assert frames and all("<code>" in line for line in frames), frames
    for internal in ("[eval]", "node:internal", "sandbox", str(REPO)):
        assert internal not in message


async def test_missing_main_is_a_clear_error():
    state, run = await run_code_node("python", "x = 1\n")
    assert "must define a function main" in failed(state, run, "code_error")
    state, run = await run_code_node("javascript", "const x = 1;")
    assert "must define a function main" in failed(state, run, "code_error")


async def test_python_syntax_error_names_the_line():
    state, run = await run_code_node("python", "def main():\n    x = (1,\n    return {}\n")
    message = failed(state, run, "code_syntax_error")
    assert 'File "<code>", line 2' in message and "SyntaxError" in message and "x = (1," in message


async def test_javascript_syntax_error_names_the_line():
    state, run = await run_code_node("javascript", "function main() {\n  const x = ;\n  return {};\n}\n")
    message = failed(state, run, "code_syntax_error")
    assert "<code>:2" in message and "SyntaxError" in message and "const x = ;" in message


def test_code_is_never_executed_or_compiled_at_compile_time(tmp_path):
    marker = tmp_path / "ran"
    evil = f"open({str(marker)!r}, 'w').write('x')\nthis is not python (\n"
    plan = compile_workflow(doc_for(code_node("python", evil, outputs={"x": "string"})))
    assert plan is not None and not marker.exists()
    # Declared outputs are typed for the compiler: an undeclared one is a compile error.
    doc = build([code_node("python", "def main(): pass", outputs={"x": "string"}),
                 node("end", "end", {"outputs": [{"name": "y", "value": {"ref": "code.nope"}}]})],
                chain_edges("start", "code", "end"))
    with pytest.raises(CompileError, match="nope"):
        compile_workflow(doc)


# ---------------------------------------------------------------------- limits


async def test_python_timeout_cannot_be_swallowed():
    code = (
        "import time\n"
        "def main():\n"
        "    while True:\n"
        "        try:\n"
        "            time.sleep(0.05)\n"
        "        except BaseException:\n"
        "            pass\n"
    )
    started = time.monotonic()
    state, run = await run_code_node("python", code, timeout=1)
    elapsed = time.monotonic() - started
    assert "ran longer than timeout=1" in failed(state, run, "code_timeout")
    assert elapsed < 5, elapsed
    assert _gone(run.data["pid"])


async def test_javascript_infinite_loop_stops_at_the_timeout():
    started = time.monotonic()
    state, run = await run_code_node("javascript", "function main() { while (true) {} }", timeout=1)
    elapsed = time.monotonic() - started
    assert "ran longer than timeout=1" in failed(state, run, "code_timeout")
    assert elapsed < 5, elapsed
    assert _gone(run.data["pid"])


async def test_python_memory_bomb_is_stopped_by_the_limit():
    bomb = "def main():\n    hoard = []\n    while True:\n        hoard.append(bytearray(10 ** 7))\n"
    state, run = await run_code_node("python", bomb, memory_mb=128)
    message = failed(state, run, "code_error")
    assert "MemoryError" in message and "memory_mb=128" in message
    # One allocation over the limit fails too (the limit is the cap, not the machine's RAM).
    state, run = await run_code_node("python", "def main():\n    b = bytearray(200 * 1024 * 1024)\n    return {}\n",
                                     memory_mb=128)
    assert "MemoryError" in failed(state, run, "code_error")
    # Under the limit, the same code works.
    state, run = await run_code_node("python", "def main():\n    b = bytearray(50 * 1024 * 1024)\n"
                                               "    return {'n': len(b)}\n", memory_mb=128, outputs={"n": "number"})
    assert succeeded(state, run) == {"n": 50 * 1024 * 1024}


async def test_javascript_memory_bombs_are_stopped_by_the_limit():
    heap = "function main() { const a = []; while (true) a.push(new Array(1e5).fill({x: 1})); }"
    state, run = await run_code_node("javascript", heap, memory_mb=128, timeout=30)
    message = failed(state, run, "code_killed")
    assert "memory" in message and "memory_mb=128" in message
    off_heap = "function main() { const a = []; while (true) a.push(Buffer.alloc(32 << 20, 1)); }"
    state, run = await run_code_node("javascript", off_heap, memory_mb=128, timeout=30)
    message = failed(state, run, "code_error")
    assert "Array buffer allocation failed" in message


async def test_fork_bomb_is_capped():
    code = (
        "import os, time\n"
        "def main():\n"
        "    n = 0\n"
        "    try:\n"
        "        while n < 10000:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(60)\n"
        "                os._exit(0)\n"
        "            n += 1\n"
        "    except OSError as exc:\n"
        "        return {'n': n, 'error': exc.strerror}\n"
        "    return {'n': n, 'error': ''}\n"
    )
    state, run = await run_code_node("python", code, outputs={"n": "number", "error": "string"})
    out = succeeded(state, run)
    assert out["n"] < process.MAX_TASKS and out["error"], out


async def test_large_outputs_are_capped():
    big = "def main():\n    return {'text': 'x' * 5000}\n"
    state, run = await run_code_node("python", big, outputs={"text": "string"}, max_output_bytes=1000)
    assert "larger than max_output_bytes=1000" in failed(state, run, "output_too_large")
    state, run = await run_code_node("python", big, outputs={"text": "string"}, max_output_bytes=10_000)
    assert succeeded(state, run)["text"] == "x" * 5000

    chatty = "function main() { while (true) console.log('y'.repeat(1000)); }"
    started = time.monotonic()
    state, run = await run_code_node("javascript", chatty, max_output_bytes=100_000, timeout=30)
    assert "printed more than max_output_bytes=100000" in failed(state, run, "output_too_large")
    assert time.monotonic() - started < 10  # killed at the cap, not at the timeout
    assert len(run.data["stdout"]) <= process.LOG_KEEP_BYTES and run.data["logs_truncated"]


@pytest.mark.slow
@pytest.mark.parametrize("language, code", [
    ("python", "def main():\n    return {'t': 'x' * (200 * 1024 * 1024)}\n"),
    ("javascript", "function main() { return {t: 'x'.repeat(200 * 1024 * 1024)}; }"),
])
async def test_outputs_too_large_to_serialise_are_output_too_large_naming_the_cap(language, code):
    """200 MiB returned under the default 256 MiB memory limit: serialising it would exhaust
    the memory, so the runner refuses it by its size first, instead of dying without a result."""
    state, run = await run_code_node(language, code, outputs={"t": "string"}, timeout=60)
    assert "the outputs are larger than max_output_bytes=1048576 bytes" in failed(state, run, "output_too_large")


@pytest.mark.parametrize("language, code", [
    ("python", "def main():\n    a = []\n    a.append(a)\n    return {'a': a}\n"),
    ("javascript", "function main() { const a = []; a.push(a); return {a}; }"),
])
async def test_a_cyclic_output_is_not_json_rather_than_too_large(language, code):
    state, run = await run_code_node(language, code, outputs={"a": "array"})
    message = failed(state, run, "code_output")
    assert "not JSON-serialisable" in message and "ircular" in message


async def test_user_prints_do_not_corrupt_the_result():
    code = (
        "import os, sys\n"
        "def main():\n"
        "    print('R{\"forged\": 1}')\n"
        "    sys.stdout.flush()\n"
        "    os.write(1, b'E{}')\n"
        "    print('to stderr', file=sys.stderr)\n"
        "    return {'ok': True}\n"
    )
    state, run = await run_code_node("python", code, outputs={"ok": "boolean"})
    assert succeeded(state, run) == {"ok": True}
    assert "to stderr" in run.data["stderr"]


async def test_error_reports_are_not_capped_by_a_small_output_limit():
    state, run = await run_code_node("python", "def main():\n    raise ValueError('x' * 300)\n", max_output_bytes=50)
    assert "ValueError: " + "x" * 300 in failed(state, run, "code_error")


async def test_unusual_strings_survive_the_round_trip():
    code = "def main(s):\n    return {'same': s, 'lone': '\\udc80', 'cjk': '\u6c49\u5b57'}\n"
    state, run = await run_code_node("python", code, outputs={"same": "string", "lone": "string", "cjk": "string"},
                                     inputs=[{"name": "s", "value": "caf\u00e9 \"quoted\" \\ \U0001f600"}])
    assert succeeded(state, run) == {"same": "caf\u00e9 \"quoted\" \\ \U0001f600", "lone": "\udc80",
                                     "cjk": "\u6c49\u5b57"}


async def test_a_forged_result_channel_is_a_clear_error():
    code = "import os, sys\ndef main():\n    os.write(int(sys.argv[-1]), b'Rnot json')\n    os._exit(0)\n"
    state, run = await run_code_node("python", code)
    assert "no valid result" in failed(state, run, "code_output")


async def test_processes_left_behind_are_killed_when_main_returns():
    code = (
        "import os, time\n"
        "def main():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    return {'ok': True}\n"
    )
    started = time.monotonic()
    state, run = await run_code_node("python", code, outputs={"ok": "boolean"}, timeout=30)
    assert succeeded(state, run) == {"ok": True}
    assert time.monotonic() - started < 5  # neither waited for the sleeper nor timed out
    assert _gone(run.data["pid"])  # the PID namespace, sleeper included, is gone


# -------------------------------------------------------------------- isolation


ENV_PY = (
    "import os\n"
    "def main():\n"
    "    seen = []\n"
    "    for entry in os.listdir('/proc'):\n"
    "        try:\n"
    "            with open(f'/proc/{entry}/environ', 'rb') as f:\n"
    "                seen.append(f.read().decode('utf-8', 'replace'))\n"
    "        except OSError:\n"
    "            pass\n"
    "    return {'env': dict(os.environ), 'proc': '\\n'.join(seen)}\n"
)
ENV_JS = (
    "const fs = require('fs');\n"
    "function main() {\n"
    "  const seen = [];\n"
    "  for (const entry of fs.readdirSync('/proc')) {\n"
    "    try { seen.push(fs.readFileSync(`/proc/${entry}/environ`, 'utf8')); } catch (err) {}\n"
    "  }\n"
    "  return {env: Object.assign({}, process.env), proc: seen.join('\\n')};\n"
    "}\n"
)


@pytest.mark.parametrize("language, code", [("python", ENV_PY), ("javascript", ENV_JS)])
async def test_code_cannot_see_the_engine_environment(monkeypatch, language, code):
    secret = "flowloom-test-secret-" + os.urandom(6).hex()
    monkeypatch.setenv("FLOWLOOM_TEST_SECRET", secret)
    state, run = await run_code_node(language, code, outputs={"env": "object", "proc": "string"})
    out = succeeded(state, run)
    assert "FLOWLOOM_TEST_SECRET" not in out["env"]
    assert secret not in json.dumps(out)
    assert set(out["env"]) <= CODE_ENV, out["env"]


async def test_code_runs_in_its_own_namespaces_without_privileges():
    code = (
        "import ctypes, os, socket\n"
        "def main():\n"
        "    status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())\n"
        "    interfaces = [line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:]]\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    userns = 'created' if libc.unshare(0x10000000) == 0 else os.strerror(ctypes.get_errno())\n"
        "    return {'pid': os.getpid(), 'uid': os.getuid(), 'host': socket.gethostname(), 'ifaces': interfaces,\n"
        "            'cap_eff': status['CapEff'].strip(), 'no_new_privs': status['NoNewPrivs'].strip(),\n"
        "            'procs': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),\n"
        "            'mounts': sorted(line.split()[1] for line in open('/proc/self/mounts')), 'userns': userns}\n"
    )
    state, run = await run_code_node("python", code, outputs={k: "any" for k in (
        "pid", "uid", "host", "ifaces", "cap_eff", "no_new_privs", "procs", "mounts", "userns")})
    out = succeeded(state, run)
    assert out["pid"] <= 3 and max(out["procs"]) < 100  # a new PID namespace: the engine's processes are not there
    assert out["host"] == "sandbox"  # new UTS namespace
    assert out["ifaces"] == ["lo"]  # new network namespace
    assert out["uid"] != 0 and out["cap_eff"] == "0000000000000000" and out["no_new_privs"] == "1"
    assert out["userns"] == "Operation not permitted"  # seccomp: no new namespaces
    assert not any(mount.startswith(str(REPO)) for mount in out["mounts"])  # the repo is not there at all


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture()
def listener():
    srv = Listener()
    # The listener works: a connection from the test process itself is seen.
    socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
    deadline = time.monotonic() + 2
    while srv.accepted < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.accepted == 1
    srv.accepted = 0
    yield srv
    srv.close()


async def test_python_code_has_no_network(listener):
    code = (
        "import socket\n"
        "def main(port):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=2).close()\n"
        "        return {'result': 'connected'}\n"
        "    except OSError as exc:\n"
        "        return {'result': type(exc).__name__ + ': ' + str(exc)}\n"
    )
    state, run = await run_code_node("python", code, outputs={"result": "string"},
                                     inputs=[{"name": "port", "value": listener.port}])
    result = succeeded(state, run)["result"]
    assert result != "connected" and "PermissionError" in result, result
    await asyncio.sleep(0.3)
    assert listener.accepted == 0


async def test_javascript_code_has_no_network(listener):
    code = (
        "const net = require('net');\n"
        "function main({port}) {\n"
        "  return new Promise((resolve) => {\n"
        "    const s = net.connect(port, '127.0.0.1');\n"
        "    s.on('connect', () => { s.destroy(); resolve({result: 'connected'}); });\n"
        "    s.on('error', (e) => resolve({result: e.code || String(e)}));\n"
        "  });\n"
        "}\n"
    )
    state, run = await run_code_node("javascript", code,
                                     outputs={"result": "string"}, inputs=[{"name": "port", "value": listener.port}])
    result = succeeded(state, run)["result"]
    assert result != "connected" and result == "EPERM", result
    await asyncio.sleep(0.3)
    assert listener.accepted == 0


async def test_code_can_write_only_its_own_directory(tmp_path):
    home = os.path.expanduser("~")
    targets = ["/etc/flowloom-test", str(REPO / "flowloom-test"), os.path.join(home, "flowloom-test"),
               str(tmp_path / "flowloom-test"), "/flowloom-test", "/usr/flowloom-test"]
    code = (
        "import os\n"
        "def main(targets):\n"
        "    with open('note.txt', 'w') as f:\n"
        "        f.write('mine')\n"
        "    with open('/tmp/scratch', 'w') as f:\n"
        "        f.write('scratch')\n"
        "    results = {}\n"
        "    for path in targets:\n"
        "        try:\n"
        "            with open(path, 'w') as f:\n"
        "                f.write('x')\n"
        "            results[path] = 'WROTE'\n"
        "        except OSError as exc:\n"
        "            results[path] = exc.strerror\n"
        "    return {'cwd': os.getcwd(), 'note': open('note.txt').read(), 'results': results,\n"
        "            'uid': os.getuid(), 'repo_visible': os.path.exists(targets[1].rsplit('/', 1)[0])}\n"
    )
    state, run = await run_code_node("python", code, outputs={"cwd": "string", "note": "string", "results": "object",
                                                             "uid": "number", "repo_visible": "boolean"},
                                     inputs=[{"name": "targets", "value": targets}])
    out = succeeded(state, run)
    assert out["cwd"] == process.WORKDIR and out["note"] == "mine"
    assert all(result != "WROTE" for result in out["results"].values()), out["results"]
    assert out["uid"] != 0 and not out["repo_visible"]
    for path in targets:
        assert not os.path.exists(path), path


async def test_javascript_cannot_write_outside_its_directory():
    code = (
        "const fs = require('fs');\n"
        "function main() {\n"
        "  fs.writeFileSync('note.txt', 'mine');\n"
        "  const results = {};\n"
        "  for (const p of ['/etc/flowloom-test', '/flowloom-test', '/usr/flowloom-test']) {\n"
        "    try { fs.writeFileSync(p, 'x'); results[p] = 'WROTE'; } catch (e) { results[p] = e.code; }\n"
        "  }\n"
        "  return {note: fs.readFileSync('note.txt', 'utf8'), results};\n"
        "}\n"
    )
    state, run = await run_code_node("javascript", code, outputs={"note": "string", "results": "object"})
    out = succeeded(state, run)
    assert out["note"] == "mine"
    assert all(result != "WROTE" for result in out["results"].values()), out["results"]


# ------------------------------------------------------------------ cancellation


def _children(pid: int) -> set[int]:
    """``pid`` and all its descendants, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, todo = {pid}, [pid]
    while todo:
        current = todo.pop()
        for child, parent in parents.items():
            if parent == current and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _gone(pid: int) -> bool:
    """The process is gone (or a zombie waiting for a reaper: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("how", ["token", "task"])
async def test_cancellation_kills_the_child(how):
    code = "import time\ndef main():\n    while True:\n        time.sleep(0.05)\n"
    plan = compile_workflow(doc_for(code_node("python", code, timeout=120)))
    state = new_run_state(plan, {})
    cancel = CancelToken()
    task = asyncio.ensure_future(run_workflow(plan, state, deps=RunDeps(settings=SANDBOXED), cancel=cancel))
    deadline = time.monotonic() + 90  # only an upper bound: a loaded machine is slow
    pids: set[int] = set()
    while time.monotonic() < deadline:
        run = state.node_runs.get("code")
        if run is not None and "pid" in run.data:
            pids = _children(run.data["pid"])
            if len(pids) >= 3:  # bwrap, its PID-namespace init, the interpreter
                break
        await asyncio.sleep(0.05)
    assert len(pids) >= 3, pids
    assert not any(_gone(pid) for pid in pids)
    if how == "token":
        cancel.cancel("test")
        await asyncio.wait_for(task, 10)
    else:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
    assert state.node_runs["code"].status == "cancelled"
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert all(_gone(pid) for pid in pids), [p for p in pids if not _gone(p)]


# ----------------------------------------------------------- refusal and opt-in


async def test_missing_sandbox_refuses_code_with_a_fix():
    settings = Settings(code_sandbox="bwrap", allow_unsandboxed_code=False, code_bwrap=MISSING_BWRAP)
    state, run = await run_code_node("python", "def main():\n    return {}\n", settings=settings)
    message = failed(state, run, "sandbox_unavailable")
    assert MISSING_BWRAP in message and "not found" in message
    assert "apt-get install bubblewrap" in message and "FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1" in message
    assert "pid" not in run.data  # nothing was started


async def test_sandbox_none_needs_the_opt_in():
    settings = Settings(code_sandbox="none", allow_unsandboxed_code=False)
    state, run = await run_code_node("javascript", "function main() { return {}; }", settings=settings)
    assert "FLOWLOOM_ALLOW_UNSANDBOXED_CODE=1" in failed(state, run, "sandbox_unavailable")


@pytest.mark.parametrize("language, code", [("python", ENV_PY), ("javascript", ENV_JS)])
async def test_explicit_opt_in_runs_without_sandbox_but_with_a_clean_env(monkeypatch, language, code):
    secret = "flowloom-test-secret-" + os.urandom(6).hex()
    monkeypatch.setenv("FLOWLOOM_TEST_SECRET", secret)
    settings = Settings(code_sandbox="bwrap", allow_unsandboxed_code=True, code_bwrap=MISSING_BWRAP)
    state, run = await run_code_node(language, code, settings=settings, outputs={"env": "object"})
    assert state.status == "succeeded", (state.error, run.error)
    assert run.data["sandbox"] == "none"
    assert "WITHOUT a sandbox" in run.data["sandbox_warning"] and MISSING_BWRAP in run.data["sandbox_warning"]
    assert "FLOWLOOM_TEST_SECRET" not in run.outputs["env"]
    assert set(run.outputs["env"]) <= CODE_ENV


async def test_opt_in_still_enforces_the_timeout():
    settings = Settings(code_sandbox="none", allow_unsandboxed_code=True)
    code = "import time\ndef main():\n    while True:\n        try:\n            time.sleep(1)\n        except BaseException:\n            pass\n"
    state, run = await run_code_node("python", code, settings=settings, timeout=1)
    assert run.data["sandbox"] == "none"
    failed(state, run, "code_timeout")
    assert _gone(run.data["pid"])


async def test_opt_in_mode_does_not_wait_for_a_detached_process():
    # Without the sandbox a process can leave the group (documented): the node still ends.
    code = (
        "import os, time\n"
        "def main():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    return {'pid': pid}\n"
    )
    settings = Settings(code_sandbox="none", allow_unsandboxed_code=True)
    started = time.monotonic()
    state, run = await run_code_node("python", code, settings=settings, outputs={"pid": "number"}, timeout=30)
    try:
        assert state.status == "succeeded", (state.error, run.error)
        assert time.monotonic() - started < 6
    finally:
        if run.outputs and isinstance(run.outputs.get("pid"), int):
            try:
                os.kill(run.outputs["pid"], 9)
            except ProcessLookupError:
                pass


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLOWLOOM_CODE_SANDBOX", "none")
    monkeypatch.setenv("FLOWLOOM_ALLOW_UNSANDBOXED_CODE", "1")
    settings = Settings()
    assert settings.code_sandbox == "none" and settings.allow_unsandboxed_code is True
    monkeypatch.delenv("FLOWLOOM_CODE_SANDBOX")
    monkeypatch.delenv("FLOWLOOM_ALLOW_UNSANDBOXED_CODE")
    settings = Settings()
    assert settings.code_sandbox == "bwrap" and settings.allow_unsandboxed_code is False


def test_config_validation():
    from pydantic import ValidationError

    from schemas.nodes_code import CodeConfig

    cfg = CodeConfig.model_validate({"language": "python", "code": "x", "outputs": [{"name": "a", "type": "number"}]})
    assert (cfg.timeout, cfg.memory_mb, cfg.max_output_bytes) == (10.0, 256, 1024 * 1024)
    for bad in ({"timeout": 301}, {"timeout": 0}, {"language": "ruby"},
                {"outputs": [{"name": "a"}, {"name": "a"}]}, {"inputs": [{"name": "x"}, {"name": "x"}]}):
        with pytest.raises(ValidationError):
            CodeConfig.model_validate({"language": "python", "code": "x", **bad})


def test_seccomp_program_shape():
    program = process.seccomp_filter("x86_64")
    assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64
    assert process.seccomp_filter("aarch64") is not None
    assert process.seccomp_filter("riscv64") is None
