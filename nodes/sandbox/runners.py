"""The runner programs the sandbox starts (:mod:`nodes.sandbox.process`): the child side of the protocol.

Each runner is a small script kept as text and passed to the interpreter with ``-c``
(Python) / ``-e`` (Node), the result pipe's fd number as its last argument. It reads
``{"code", "inputs", "prelude", "max_output_bytes", "site_dirs"}`` (JSON) from stdin
(``site_dirs``: the package environment's directories the Python runner appends to
``sys.path``; Node finds its packages through ``NODE_PATH``), compiles the user
code under the file name ``<code>``, calls ``main`` and writes one message to the result
pipe: ``R`` + the JSON of the returned object, or ``E`` + ``{"kind", "type", "message",
"traceback"}`` (``kind``: ``syntax``, ``definition``, ``runtime``, ``output``, or
``too_large`` when the returned object surely serialises to more than
``max_output_bytes`` - checked from its strings before serialising, which for a value
near the memory limit would kill the process and leave no result), reporting only the
frames of ``<code>`` so a traceback shows the user's line numbers and none of the runner's.

Both names are re-exported by :mod:`nodes.sandbox.process`; import them from there.
"""

__all__ = ["JS_RUNNER", "PYTHON_RUNNER"]

#: Python runner: ``python -I -S -B -c PYTHON_RUNNER RESULT_FD``.
PYTHON_RUNNER = r"""
import json, linecache, os, sys, traceback

def _runner():
    out_fd = int(sys.argv[-1])
    dumps = json.dumps

    def send(tag, payload):
        # A lone surrogate becomes its JSON escape (it only occurs inside strings).
        data = tag + payload.encode("utf-8", "backslashreplace")
        view = memoryview(data)
        while view:
            view = view[os.write(out_fd, view):]

    def user_frames(te):
        # Keep only the frames of the user's code, in the chain of causes too.
        seen = set()
        while te is not None and id(te) not in seen:
            seen.add(id(te))
            te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == "<code>"])
            te = te.__cause__ or te.__context__

    def fail(kind, exc):
        try:
            te = traceback.TracebackException.from_exception(exc)
            user_frames(te)
            text = "".join(te.format())
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        except BaseException:  # e.g. an exception whose __str__ raises
            text, message = "", type(exc).__name__
        send(b"E", dumps({"kind": kind, "type": type(exc).__name__, "message": message, "traceback": text}))

    request = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    if request.get("site_dirs"):
        import site  # under -S importing it adds nothing by itself
        for directory in request["site_dirs"]:
            site.addsitedir(directory)  # appended after the standard library, .pth files read
    code = request["code"]
    # Let tracebacks show the user's source lines for "<code>".
    linecache.cache["<code>"] = (len(code), None, code.splitlines(True), "<code>")
    try:
        compiled = compile(code, "<code>", "exec")
    except (SyntaxError, ValueError) as exc:
        return fail("syntax", exc)
    namespace = {"__name__": "__code__", "__builtins__": __builtins__}
    try:
        exec(compiled, namespace)
        main = namespace.get("main")
        if not callable(main):
            raise NameError("the code must define a function main(**inputs)")
    except BaseException as exc:
        return fail("definition", exc)
    try:
        result = main(**request["inputs"])
        if hasattr(result, "__await__"):
            import asyncio
            result = asyncio.run(result)
    except BaseException as exc:
        return fail("runtime", exc)
    if not isinstance(result, dict):
        return send(b"E", dumps({"kind": "output", "type": "TypeError", "traceback": "",
                                 "message": "main() must return a dict of outputs, got " + type(result).__name__}))
    limit = request["max_output_bytes"]
    too_large = {"kind": "too_large", "type": "OutputTooLarge", "traceback": "",
                 "message": "the outputs are larger than max_output_bytes=%d bytes" % limit}
    if _over(result, limit):
        result = None  # serialising it could exhaust the memory limit: refuse it as it is
        return send(b"E", dumps(too_large))
    try:
        payload = dumps(result, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return send(b"E", dumps({"kind": "output", "type": type(exc).__name__, "traceback": "",
                                 "message": "the outputs are not JSON-serialisable: " + str(exc)}))
    except MemoryError:
        result = payload = None
        return send(b"E", dumps(too_large))
    send(b"R", payload)

def _over(value, limit):
    # Whether the JSON of value surely has more than limit bytes: the characters of its
    # strings and keys plus one per other item, counted until limit is passed, without
    # building the JSON. A cycle of containers adds nothing and stops after limit steps
    # (serialising it then reports the cycle).
    total, steps, stack = 0, 0, [value]
    while stack and steps <= limit:
        item = stack.pop()
        steps += 1
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, (dict, list, tuple)):
            total += max(len(item) - 1, 0)  # the commas: a huge container is known too large unwalked
            if total > limit:
                return True
            stack.extend(item)
            if isinstance(item, dict):
                stack.extend(item.values())
        else:
            total += 1
        if total > limit:
            return True
    return False

try:
    _runner()
finally:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)  # neither user threads nor atexit hooks may hold the process
"""

#: JavaScript runner: ``node --max-old-space-size=N -e JS_RUNNER RESULT_FD``.
JS_RUNNER = r"""
(function runner(require) {
// Everything lives in this function: the user's script shares the global scope and
// must be free to declare its own `fs`, `run`, ...
'use strict';
const fs = require('fs');
const vm = require('vm');
const outFd = Number(process.argv[process.argv.length - 1]);
const stringify = JSON.stringify;
const exit = process.exit.bind(process);

function writeAll(fd, data) {
  while (data.length) {
    try {
      data = data.subarray(fs.writeSync(fd, data));
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

function send(tag, payload) {
  writeAll(outFd, Buffer.from(tag + payload, 'utf8'));
}

// Node queues pipe writes until the event loop runs: a busy loop printing would only
// fill memory. Write prints through at once, so the parent sees (and caps) them.
for (const [stream, fd] of [[process.stdout, 1], [process.stderr, 2]]) {
  stream.write = function write(chunk, encoding, callback) {
    if (typeof encoding === 'function') { callback = encoding; encoding = undefined; }
    writeAll(fd, typeof chunk === 'string' ? Buffer.from(chunk, encoding || 'utf8') : Buffer.from(chunk));
    if (typeof callback === 'function') process.nextTick(callback);
    return true;
  };
}

function userStack(err) {
  // The message lines, then only the frames in the user's code.
  const text = (err && typeof err.stack === 'string') ? err.stack : String(err);
  return text.split('\n').filter((line) => !/^\s+at /.test(line) || line.includes('<code>')).join('\n');
}

function fail(kind, err) {
  const isError = err instanceof Error;
  send('E', stringify({
    kind,
    type: isError ? err.name : typeof err,
    message: isError ? `${err.name}: ${err.message}` : String(err),
    traceback: userStack(err),
  }));
}

function checkJson(key, value) {
  // JSON.stringify would drop or rewrite these silently.
  const t = typeof value;
  if (t === 'undefined' || t === 'function' || t === 'symbol' || t === 'bigint') {
    throw new TypeError(`${stringify(key)} is ${t === 'undefined' ? t : 'a ' + t}`);
  }
  if (t === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`${stringify(key)} is ${value}`);
  }
  return value;
}

async function run() {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  if (request.prelude) {
    new vm.Script(request.prelude, { filename: '<prelude>' }).runInThisContext()(require);
  }
  let main;
  try {
    const script = new vm.Script(request.code + '\n;typeof main === "function" ? main : undefined;', { filename: '<code>' });
    try {
      main = script.runInThisContext();
    } catch (err) {
      return fail('definition', err);
    }
  } catch (err) {
    return fail('syntax', err);
  }
  if (typeof main !== 'function') {
    return fail('definition', new ReferenceError('the code must define a function main(inputs)'));
  }
  let result;
  try {
    result = await main(request.inputs);
  } catch (err) {
    return fail('runtime', err);
  }
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    return send('E', stringify({ kind: 'output', type: 'TypeError', traceback: '',
      message: `main() must return an object of outputs, got ${result === null ? 'null' : Array.isArray(result) ? 'array' : typeof result}` }));
  }
  const limit = request.max_output_bytes;
  const tooLarge = { kind: 'too_large', type: 'OutputTooLarge', traceback: '',
    message: `the outputs are larger than max_output_bytes=${limit} bytes` };
  if (over(result, limit)) {
    // Serialising it could exhaust the heap, which no catch survives: refuse it as it is.
    result = null;
    return send('E', stringify(tooLarge));
  }
  let payload;
  try {
    payload = stringify(result, checkJson);
  } catch (err) {
    if (err instanceof RangeError && /string length/i.test(err.message)) return send('E', stringify(tooLarge));
    return send('E', stringify({ kind: 'output', type: 'TypeError', traceback: '',
      message: `the outputs are not JSON-serialisable: ${err && err.message}` }));
  }
  send('R', payload);
}

function over(value, limit) {
  // Whether the JSON of value surely has more than limit bytes: the characters of its
  // strings and keys plus one per other item, counted until limit is passed, without
  // building the JSON. A cycle of objects adds nothing and stops after limit steps
  // (serialising it then reports the cycle).
  let total = 0;
  let steps = 0;
  const stack = [value];
  while (stack.length && steps <= limit) {
    const item = stack.pop();
    steps += 1;
    if (typeof item === 'string') {
      total += item.length + 2;
    } else if (Array.isArray(item)) {
      total += Math.max(item.length - 1, 0);  // the commas: a huge array is known too large unwalked
      if (total > limit) return true;
      for (let i = 0; i < item.length; i++) stack.push(item[i]);
    } else if (item !== null && typeof item === 'object') {
      for (const key in item) {
        if (!Object.prototype.hasOwnProperty.call(item, key)) continue;
        total += key.length + 3;
        if (total > limit) return true;
        stack.push(item[key]);
      }
    } else {
      total += 1;
    }
    if (total > limit) return true;
  }
  return false;
}

run().then(() => exit(0), (err) => { fail('runtime', err); exit(0); });
})(require);
"""
