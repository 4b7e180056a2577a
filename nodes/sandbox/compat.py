"""FastGPT semantics for imported code nodes (``semantics: fastgpt``, see
:class:`~schemas.nodes_code.CodeConfig`): input conversion and the JavaScript globals
FastGPT's sandbox defines.

FastGPT converts every input of a code node to its declared ``valueType`` before the
code runs (a ``string`` input fed by a JSON response receives JSON text), does not check
what ``main`` returns, and offers JavaScript code a few helper globals. Flowloom's own
code nodes are strictly typed; nodes imported from FastGPT keep FastGPT's behaviour so
a flow gives the same result it gives there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from schemas.types import VarType

__all__ = ["FASTGPT_JS_GLOBALS", "FASTGPT_JS_PRELUDE", "fastgpt_input", "fastgpt_inputs"]

#: The globals :data:`FASTGPT_JS_PRELUDE` defines (what the importer can provide).
FASTGPT_JS_GLOBALS = frozenset({"delay", "countToken", "strToBase64", "createHmac"})

#: JavaScript run before the user's script when ``semantics`` is ``fastgpt``: a function
#: expression the runner calls with ``require``. It defines:
#: ``delay(ms)`` (a promise resolved after ``ms``, at most 10 s as in FastGPT);
#: ``countToken(text)`` (an estimate: one token per CJK character, about four
#: characters per token otherwise - FastGPT counts with a cl100k tokenizer, which the
#: sandbox does not ship); ``strToBase64(text, prefix = '')`` (``prefix`` + the UTF-8
#: text in base64); ``createHmac(algorithm, secret)`` (``{timestamp, sign}``: the HMAC
#: of ``"<timestamp>\n<secret>"`` keyed with ``secret``, base64 then URI-encoded, as
#: chat-bot webhooks expect).
FASTGPT_JS_PRELUDE = r"""
(function defineFastGPTGlobals(require) {
  const crypto = require('crypto');
  const define = (name, value) => Object.defineProperty(globalThis, name, {value, writable: true, configurable: true});
  define('delay', (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(Math.max(Number(ms) || 0, 0), 10000))));
  define('countToken', (text) => {
    const s = typeof text === 'string' ? text : JSON.stringify(text === undefined ? '' : text);
    const cjk = (s.match(/[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]/g) || []).length;
    return cjk + Math.ceil((s.length - cjk) / 4);
  });
  define('strToBase64', (text, prefix = '') => prefix + Buffer.from(String(text), 'utf8').toString('base64'));
  define('createHmac', (algorithm, secret) => {
    const timestamp = Date.now().toString();
    const hmac = crypto.createHmac(algorithm, secret);
    hmac.update(`${timestamp}\n${secret}`, 'utf8');
    return {timestamp, sign: encodeURIComponent(hmac.digest('base64'))};
  });
})
"""


def _parsed(text: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, kind) else None


def fastgpt_input(value: Any, type_: VarType | None) -> Any:
    """``value`` converted to ``type_`` the way FastGPT converts a code input to its ``valueType``.

    - ``string``: a string stays; an object/array becomes JSON text; a number or boolean
      its text (``5``, ``true``).
    - ``number``: a number stays; numeric text or a boolean becomes a number; anything
      else null (FastGPT gets ``NaN``, which JSON cannot carry).
    - ``boolean``: the text ``"true"`` is true, other text false; other values by truthiness.
    - ``object`` / ``array``: JSON text holding one is parsed; anything else stays.
    - null (FastGPT: undefined), ``any``, ``file`` or no type: unchanged.
    """
    if value is None or type_ in (None, VarType.any, VarType.file):
        return value
    if type_ is VarType.string:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
    if type_ is VarType.number:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str):
            text = value.strip()
            for parse in (int, float):
                try:
                    number = parse(text)
                except ValueError:
                    continue
                return number if number == number and number not in (float("inf"), float("-inf")) else None
        return None
    if type_ is VarType.boolean:
        return value == "true" if isinstance(value, str) else bool(value)
    if isinstance(value, str):
        parsed = _parsed(value, dict if type_ is VarType.object else list)
        return value if parsed is None else parsed
    return value


def fastgpt_inputs(values: Mapping[str, Any], types: Mapping[str, VarType]) -> dict[str, Any]:
    """Every bound input converted by :func:`fastgpt_input` to its type in ``types``."""
    return {name: fastgpt_input(value, types.get(name)) for name, value in values.items()}
