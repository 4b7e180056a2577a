"""The code sandbox's package environment: where it lives, what it holds, what a piece of
code needs from it and the command that installs what is missing.

Code nodes get Python's standard library and Node's built-in modules. The operator may
declare more: Python requirements and npm packages, installed by ``flowloom sandbox
install`` (:mod:`nodes.sandbox.packages`) into an environment under ``FLOWLOOM_HOME``,
which the sandbox mounts read-only (:mod:`nodes.sandbox.process`). Nothing is ever installed
while code runs: a run has no network, and what code may load is the operator's choice.

Layout (``<home>`` is ``Settings.home``)::

    <home>/sandbox/requirements.txt     declared Python requirements (pip's format)
    <home>/sandbox/npm-packages.txt     declared npm packages, one spec a line
    <home>/sandbox/envs/<id>/           one installed environment:
        python/                         pip install --target (top-level modules)
        node_modules/                   npm install --prefix envs/<id>
        manifest.json                   {"python": "3.11", "requirements": [...], "npm": [...], ...}
    <home>/sandbox/packages -> envs/<id>   the active environment (a symlink)

The symlink is replaced in one step after a complete install, so a code node starting
at any moment sees one whole environment, never a half-installed one. Python packages
with C extensions are built for one Python version: an environment installed for
another version than the running interpreter's counts as holding no Python package,
and :attr:`PackageEnv.problem` says to install again.

This module only reads; it never imports a package (that would run its code in the
engine) - a module is installed when its file or directory is in the environment.
"""

from __future__ import annotations

import importlib.machinery
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from schemas.code_imports import is_path_module, third_party_imports

from .settings import Settings

__all__ = [
    "ACTIVE",
    "MANIFEST",
    "NPM_FILE",
    "REQUIREMENTS_FILE",
    "SANDBOX_NODE_MODULES",
    "SANDBOX_PYTHON",
    "PackageEnv",
    "PackageNeed",
    "install_command",
    "install_commands",
    "missing_message",
    "package_env",
    "package_needs",
    "python_version",
    "requirement_name",
    "sandbox_home",
]

Language = Literal["python", "javascript"]

#: Where the sandbox mounts the environment's Python modules (appended to ``sys.path``).
SANDBOX_PYTHON = "/packages/python"
#: Where the sandbox mounts the environment's ``node_modules`` (``NODE_PATH``).
SANDBOX_NODE_MODULES = "/packages/node_modules"
REQUIREMENTS_FILE = "requirements.txt"
NPM_FILE = "npm-packages.txt"
MANIFEST = "manifest.json"
#: The symlink naming the active environment, in ``<home>/sandbox``.
ACTIVE = "packages"

#: Import names whose distribution on PyPI has another name (the common cases in code
#: nodes); any other module is installed under its own name.
_DISTRIBUTIONS = {
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "cv2": "opencv-python-headless",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "docx": "python-docx",
    "pptx": "python-pptx",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "jwt": "PyJWT",
    "Crypto": "pycryptodome",
    "fitz": "PyMuPDF",
    "magic": "python-magic",
    "attr": "attrs",
    "Levenshtein": "python-Levenshtein",
}


def sandbox_home(settings: Settings) -> Path:
    """``<home>/sandbox``: the declarations and the installed environments."""
    return Path(settings.home) / "sandbox"


def python_version() -> str:
    """``major.minor`` of this interpreter, which the sandbox runs (its base interpreter)."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True, slots=True)
class PackageEnv:
    """The active package environment as the sandbox will mount it.

    ``root``: the environment's directory (resolved), None when none was installed;
    ``python`` / ``node_modules``: its module directories, None when absent (or, for
    Python, installed for another Python version); ``manifest``: what it was installed
    from; ``problem``: why part of it cannot be used, for ``flowloom sandbox list``.
    """

    root: Path | None = None
    python: Path | None = None
    node_modules: Path | None = None
    manifest: dict[str, Any] | None = None
    problem: str | None = None

    def has(self, language: Language, module: str) -> bool:
        """Whether ``module`` (a top-level Python module, or an npm package) is installed."""
        if language == "python":
            return self.python is not None and _python_module_in(self.python, module)
        if is_path_module(module) or self.node_modules is None:
            return False
        return (self.node_modules / module / "package.json").is_file()


def _python_module_in(directory: Path, module: str) -> bool:
    """A package directory or a module file (source, bytecode or extension) of that name."""
    if not module.isidentifier():
        return False
    if (directory / module).is_dir():
        return True
    return any((directory / (module + suffix)).is_file() for suffix in importlib.machinery.all_suffixes())


def package_env(settings: Settings) -> PackageEnv:
    """The active environment of ``settings.home`` (an empty one when nothing was installed
    or the link points nowhere). Reads a symlink, two directories and a small file."""
    link = sandbox_home(settings) / ACTIVE
    try:
        root = link.resolve(strict=True)
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RuntimeError):
        return PackageEnv()
    if not isinstance(manifest, dict):
        return PackageEnv()
    python: Path | None = root / "python"
    node_modules = root / "node_modules"
    problem = None
    built_for = str(manifest.get("python") or "")
    if python is not None and not python.is_dir():
        python = None
    elif python is not None and built_for != python_version():
        problem = (
            f"the Python packages were installed for Python {built_for or 'unknown'}, the sandbox "
            f"runs {python_version()}: install them again (flowloom sandbox install)"
        )
        python = None
    return PackageEnv(
        root=root,
        python=python,
        node_modules=node_modules if node_modules.is_dir() else None,
        manifest=manifest,
        problem=problem,
    )


def requirement_name(language: Language, module: str) -> str | None:
    """What to install for ``module``: a PyPI distribution (``json_repair`` ->
    ``json-repair``, ``yaml`` -> ``PyYAML``) or the npm package itself; None for a
    JavaScript path (``./util``), which no package provides."""
    if language == "javascript":
        return None if is_path_module(module) else module
    return _DISTRIBUTIONS.get(module, module.replace("_", "-"))


def install_command(language: Language, requirements: list[str]) -> str:
    """The command that installs ``requirements`` into the sandbox's environment."""
    if language == "python":
        return "flowloom sandbox install " + shlex.join(requirements)
    return "flowloom sandbox install " + " ".join(f"--npm {shlex.quote(r)}" for r in requirements)


@dataclass(frozen=True, slots=True)
class PackageNeed:
    """A module some code imports: ``language``, ``module`` (as imported), ``requirement``
    (what to install; None for a JavaScript path) and whether it is ``installed``."""

    language: Language
    module: str
    requirement: str | None
    installed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "module": self.module,
            "requirement": self.requirement,
            "installed": self.installed,
        }


def package_needs(env: PackageEnv, language: Language, code: str) -> list[PackageNeed]:
    """Every third-party module ``code`` imports, with whether ``env`` has it."""
    return [
        PackageNeed(language, module, requirement_name(language, module), env.has(language, module))
        for module in third_party_imports(language, code)
    ]


def install_commands(needs: list[PackageNeed]) -> list[str]:
    """One command per language installing every missing need (each requirement once)."""
    commands = []
    for language in ("python", "javascript"):
        wanted = [
            n.requirement for n in needs if n.language == language and not n.installed and n.requirement
        ]
        if wanted:
            commands.append(install_command(language, list(dict.fromkeys(wanted))))
    return commands


def missing_message(needs: list[PackageNeed]) -> str:
    """What is missing among ``needs`` and how to install it, in one sentence ("" when
    nothing is): ``the code imports 'json_repair', which is not installed in the code
    sandbox (...): install with `flowloom sandbox install json-repair```."""
    missing = [n for n in needs if not n.installed]
    if not missing:
        return ""
    parts = []
    installable = [n for n in missing if n.requirement]
    if installable:
        names = ", ".join(f"'{n.module}'" for n in installable)
        which = "is" if len(installable) == 1 else "are"
        commands = " and ".join(f"`{c}`" for c in install_commands(installable))
        parts.append(
            f"the code imports {names}, which {which} not installed in the code sandbox "
            f"(it offers only {_runtime(installable[0].language)} and what the operator "
            f"installs): install with {commands}"
        )
    paths = [n.module for n in missing if not n.requirement]
    if paths:
        parts.append(
            f"the code loads {', '.join(repr(p) for p in paths)}, a file of its author's machine that the "
            "sandbox does not have (move its code into the node)"
        )
    return "; ".join(parts)


def _runtime(language: Language) -> str:
    return "the Python standard library" if language == "python" else "Node's built-in modules"
