"""The corpus and questions of ``bench/knowledge.py``: real text shipped with Python.

- **Topics**: ``pydoc_data.topics.topics`` (the language reference pages ``help()`` shows:
  79 topics, ~0.47 MB on CPython 3.11), one document per topic.
- **Docstrings**: the docstrings of the standard library's modules, classes and functions,
  read from the source files with ``ast`` (nothing is imported), one document per module
  (tests, ``idlelib``, ``lib2to3`` and ``site-packages`` left out; ~1.6 MB on 3.11).
- **Questions**: 50 questions, each written from one topic whose text answers it; the
  relevant chunks of a question are the chunks of that topic's document.

Search sets larger than the chunked corpus (100k chunks) repeat its chunks: copy ``k > 0``
of a chunk is ``"(copy k) " + text`` - a distinct text with a distinct vector (see
``_embed_server.embed_text``), whose words are those of the original.
"""

from __future__ import annotations

import ast
import os
import sysconfig
from collections.abc import Iterator

__all__ = ["QUESTIONS", "docstring_documents", "search_texts", "topic_documents"]

_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "__pycache__",
                        "ensurepip", "turtledemo"})


def topic_documents() -> list[tuple[str, str]]:
    """``[(source name, text)]``: one ``topic-<key>.txt`` per pydoc topic, in key order."""
    from pydoc_data.topics import topics

    return [(f"topic-{key}.txt", topics[key]) for key in sorted(topics)]


def _module_docstrings(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return ""
    parts: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                name = getattr(node, "name", "module")
                parts.append(f"{name}\n\n{doc}")
    return "\n\n".join(parts)


def docstring_documents() -> list[tuple[str, str]]:
    """``[(source name, text)]``: one ``stdlib-<module>.txt`` per standard-library module
    with docstrings, in path order (module docstrings first, then classes and functions)."""
    lib = sysconfig.get_paths()["stdlib"]
    found: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(lib):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            text = _module_docstrings(path)
            if text.strip():
                module = os.path.relpath(path, lib)[:-3].replace(os.sep, ".")
                found.append((f"stdlib-{module}.txt", text))
    return found


def search_texts(base: list[str], count: int) -> Iterator[str]:
    """``count`` texts: ``base`` in order, then its copies ``"(copy k) " + text``, k = 1, 2..."""
    for i in range(count):
        copy, index = divmod(i, len(base))
        yield base[index] if copy == 0 else f"(copy {copy}) {base[index]}"


#: (pydoc topic, question its text answers), 50 of them
QUESTIONS: list[tuple[str, str]] = [
    ("assert", "Is the expression of an assert statement evaluated when Python runs with optimization -O?"),
    ("assignment", "How is a starred target in a target list assigned when unpacking an iterable?"),
    ("async", "Where can an await expression be used, and what is an asynchronous context manager?"),
    ("attribute-access", "When is __getattr__ called compared to __getattribute__?"),
    ("augassign", "Is the target of an augmented assignment like x += 1 evaluated only once?"),
    ("binary", "What does the modulo operator return when the operands are negative numbers?"),
    ("bitwise", "What priority does the xor operator ^ have among the binary bitwise operations?"),
    ("booleans", "What value does the expression x or y return when x is false?"),
    ("break", "Does a break statement skip the else clause of a loop?"),
    ("calls", "What happens when a keyword argument names a parameter already filled by a positional argument?"),
    ("class", "In which namespace is a class body executed, and how are class decorators applied?"),
    ("comparisons", "How is a chained comparison like a < b < c evaluated?"),
    ("context-managers", "What arguments does the __exit__ method of a context manager receive?"),
    ("continue", "What does the continue statement do inside a loop?"),
    ("conversions", "How are the numeric arguments of an arithmetic operator converted to a common type?"),
    ("customization", "What is the difference between __repr__ and __str__ of an object?"),
    ("debugger", "How do I set a breakpoint with pdb and continue execution until it is hit?"),
    ("del", "What does deleting a name with del do to its binding?"),
    ("dict", "What happens when a dictionary display contains the same key twice?"),
    ("exceptions", "Which model of error handling does Python use: termination or resumption?"),
    ("execmodel", "What is a code block in the execution model, and what are the blocks of a program?"),
    ("floating", "Which forms can a floating point literal take, with an exponent and underscores?"),
    ("for", "Does assigning to the loop variable inside a for loop change the next iteration?"),
    ("formatstrings", "How do fill and align work in the format specification mini-language?"),
    ("function", "When are default parameter values of a function definition evaluated?"),
    ("global", "Can a name be used in a code block before its global declaration?"),
    ("identifiers", "Which identifiers are soft keywords, like match and case?"),
    ("if", "How does an if statement with elif and else clauses select the suite to run?"),
    ("imaginary", "How do you write a complex number with a nonzero real part using an imaginary literal?"),
    ("import", "How does a relative import with leading dots find the package to import from?"),
    ("in", "How does the membership test use __contains__ or __iter__ of a container?"),
    ("integers", "Are leading zeros allowed in a non-zero decimal integer literal?"),
    ("lambda", "Can a lambda expression contain statements or annotations?"),
    ("lists", "What does a list display with a comprehension produce?"),
    ("nonlocal", "Which scope does a nonlocal statement refer to, and can it name a global variable?"),
    ("numeric-types", "When are the reflected methods like __radd__ called for the right operand?"),
    ("objects", "What are an object's identity, type and value, and what does id() return?"),
    ("operator-summary", "Which operators bind most tightly in the operator precedence table?"),
    ("pass", "Which statement is a null operation used as a placeholder when nothing needs to be executed?"),
    ("power", "What does the power operator return for a negative number raised to a fractional power?"),
    ("raise", "How does raise ... from set the __cause__ attribute for exception chaining?"),
    ("return", "What does a return statement inside a generator function do with StopIteration?"),
    ("sequence-types", "Which methods must a container implement: __len__, __getitem__ and __setitem__?"),
    ("shifting", "What is a right shift by n bits equal to in terms of floor division by a power of two?"),
    ("slicings", "How is a slice with a stride written in a slicing, and what is the slice object?"),
    ("string-methods", "What does str.casefold do compared to str.lower?"),
    ("strings", "Which escape sequences are recognized in raw strings and bytes literals?"),
    ("truth", "Which built-in objects are considered false in truth value testing?"),
    ("try", "When is the finally clause of a try statement executed, and what if it returns?"),
    ("with", "What is the with statement equivalent to in terms of try, finally, __enter__ and __exit__?"),
]
