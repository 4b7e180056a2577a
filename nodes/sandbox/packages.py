"""Installs the packages code nodes may use (``flowloom sandbox install``) and lists them
(``flowloom sandbox list``). The layout and the read side are :mod:`engine.code_packages`.

The operator declares Python requirements (pip's requirement format, kept in
``<home>/sandbox/requirements.txt``) and npm packages (``<home>/sandbox/npm-packages.txt``).
:func:`install` adds new declarations to them and installs everything declared into a
new environment directory: pip (``python -m pip install --target``, the interpreter
that runs the sandbox) and npm (``npm install --prefix``). Only when both succeed does
the environment become the active one (one symlink replaced) and are the declarations
written: a failed install - a mistyped name, no network - changes nothing, and a code
node never sees a half-installed environment. The environment before stays on disk
until the next install, since a code node that started with it may still be reading
it; older ones are removed.

The tools run on the host with the operator's rights and settings (``pip.conf``, the
``PIP_*`` and ``npm_config_*`` variables, an index mirror), as ``pip install`` and
``npm install`` would. ``find_links`` / ``no_index`` install from a local directory of
wheels (``pip download -d DIR ...`` on a machine with network), for a host without
one; with ``no_index`` npm runs ``--offline`` (its cache and local tarballs).

Everything installed is made readable by every user: code runs as a throw-away uid in
the sandbox, which must read the files it imports, and can write none of them.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.code_packages import (
    ACTIVE,
    MANIFEST,
    NPM_FILE,
    REQUIREMENTS_FILE,
    PackageEnv,
    package_env,
    python_version,
    sandbox_home,
)
from engine.settings import Settings

__all__ = [
    "Declared",
    "InstallFailed",
    "absolute",
    "declared",
    "install",
    "inventory",
    "merge_declarations",
    "requirement_lines",
]

#: Lines of a tool's output kept for the error when it fails.
_TAIL_LINES = 30
_PEP508_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: Requirement-file options that cannot be copied into the declarations.
_REFUSED_OPTIONS = {
    "-r": "a nested requirements file (list its lines instead)",
    "--requirement": "a nested requirements file (list its lines instead)",
    "-c": "a constraints file (list pinned requirements instead)",
    "--constraint": "a constraints file (list pinned requirements instead)",
    "-e": "an editable install (it links to a directory the sandbox cannot see)",
    "--editable": "an editable install (it links to a directory the sandbox cannot see)",
}


class InstallFailed(Exception):
    """An install did not complete; the message names the step and ends with the tool's
    last lines. The active environment and the declarations are unchanged."""


@dataclass(slots=True)
class Declared:
    """The declared packages: pip requirement lines and npm specs, in order."""

    python: list[str] = field(default_factory=list)
    npm: list[str] = field(default_factory=list)


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def declared(settings: Settings) -> Declared:
    """What ``<home>/sandbox`` declares (empty when nothing was ever installed)."""
    home = sandbox_home(settings)
    return Declared(_read_lines(home / REQUIREMENTS_FILE), _read_lines(home / NPM_FILE))


def _python_key(line: str) -> str:
    """The project a requirement line names, normalised (``JSON_Repair>=0.5`` -> ``json-repair``);
    an option line is its own key."""
    m = _PEP508_NAME.match(line)
    if line.startswith("-") or not m:
        return line
    return re.sub(r"[-_.]+", "-", m.group(1)).lower()


def _npm_key(spec: str) -> str:
    """The package an npm spec names (``lodash@4`` -> ``lodash``, ``@a/b@1`` -> ``@a/b``);
    a path, URL, tarball or ``user/repo`` is its own key."""
    if spec.startswith((".", "/", "~")) or ":" in spec or spec.endswith((".tgz", ".tar.gz")):
        return spec
    if spec.startswith("@"):
        return "@" + spec[1:].partition("@")[0]
    return spec if "/" in spec else spec.partition("@")[0]


def absolute(spec: str, base: str | os.PathLike[str] | None = None) -> str:
    """``spec`` with a relative local path (``./pkg.whl``, ``../lib.tgz``, ``~/x``) made
    absolute from ``base`` (default: the working directory): the declarations are
    installed again later, from another directory."""
    if spec.startswith(("./", "../", "~")):
        return os.path.abspath(os.path.join(base or os.getcwd(), os.path.expanduser(spec)))
    return spec


def requirement_lines(text: str, source: str, base: str | os.PathLike[str] | None = None) -> list[str]:
    """The requirement lines of a requirements file's ``text`` (comments and blanks left
    out; relative paths made absolute from ``base``, the file's directory). Raises
    ValueError naming ``source`` and the line for an option that cannot be copied
    (nested files, editable installs)."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option = line.split()[0].split("=")[0]
        if option in _REFUSED_OPTIONS:
            raise ValueError(f"{source}, line {number}: {line!r} is {_REFUSED_OPTIONS[option]}")
        lines.append(absolute(line, base))
    return lines


def merge_declarations(current: Declared, python: list[str], npm: list[str]) -> Declared:
    """``current`` with ``python`` requirement lines and ``npm`` specs added: a new line
    for a project already declared replaces it (``numpy`` then ``numpy==2.1`` pins it),
    the order of first declaration is kept."""

    def merge(old: list[str], new: list[str], key: Callable[[str], str]) -> list[str]:
        by_key = {key(line): line for line in old}
        for line in new:
            by_key[key(line)] = line
        return list(by_key.values())

    return Declared(merge(current.python, python, _python_key), merge(current.npm, npm, _npm_key))


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One install at a time per home (a second waits for the first)."""
    with open(home / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_tool(step: str, argv: list[str], on_line: Callable[[str], None]) -> None:
    """Run one install step in the working directory (relative ``find_links`` are the
    caller's), each output line to ``on_line``.

    Raises:
        InstallFailed: it exited non-zero (message: ``step``, the exit code, its last lines).
    """
    tail: list[str] = []
    # pip's advice against installing as root is about site-packages, not a --target directory.
    env = {**os.environ, "PIP_ROOT_USER_ACTION": "ignore"}
    with subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip("\n")
                on_line(line)
                tail = (tail + [line])[-_TAIL_LINES:]
            code = proc.wait()
        except BaseException:
            proc.kill()
            raise
    if code != 0:
        raise InstallFailed(f"{step} failed (exit code {code}):\n" + "\n".join(tail))


def _pip_argv(target: Path, requirements: Path, find_links: list[str], no_index: bool) -> list[str]:
    argv = [sys.executable, "-m", "pip", "install", "--target", str(target), "--no-input"]
    argv += ["--disable-pip-version-check", "--no-warn-script-location", "--progress-bar", "off"]
    for link in find_links:
        argv += ["--find-links", link]
    if no_index:
        argv.append("--no-index")
    return argv + ["-r", str(requirements)]


def _npm_argv(npm: str, prefix: Path, specs: list[str], no_index: bool) -> list[str]:
    # --install-links: a local directory is copied, not linked to a path the sandbox cannot see.
    argv = [
        npm,
        "install",
        "--prefix",
        str(prefix),
        "--no-audit",
        "--no-fund",
        "--omit=dev",
        "--install-links",
    ]
    if no_index:
        argv.append("--offline")
    return argv + specs


def _readable_by_all(root: Path) -> None:
    """Add read (and, where someone may execute, execute) rights for every user."""
    for directory, _dirs, files in os.walk(root):
        os.chmod(directory, os.stat(directory).st_mode | 0o555)
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                continue
            mode = os.stat(path).st_mode
            os.chmod(path, mode | 0o444 | (0o111 if mode & 0o111 else 0))


def install(
    settings: Settings,
    *,
    python: Sequence[str] = (),
    npm: Sequence[str] = (),
    find_links: Sequence[str] = (),
    no_index: bool = False,
    on_line: Callable[[str], None] = lambda line: None,
) -> PackageEnv:
    """Declare ``python`` requirement lines and ``npm`` specs in addition to what is
    declared, install all of it into a new environment and make it the active one
    (see the module doc). ``on_line`` receives pip's and npm's output as it comes.

    Returns the new active environment.

    Raises:
        InstallFailed: pip or npm failed, or npm is needed and missing.
        OSError: the home cannot be written.
    """
    home = sandbox_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home):
        wanted = merge_declarations(declared(settings), list(python), list(npm))
        env_dir = (
            home
            / "envs"
            / (datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3))
        )
        env_dir.mkdir(parents=True)
        try:
            _install_into(env_dir, wanted, list(find_links), no_index, on_line)
            _readable_by_all(env_dir)
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise
        previous = _activate(home, env_dir)
        _write_declarations(home, wanted)
        _prune(home, keep={env_dir.name, previous})
    return package_env(settings)


def _install_into(
    env_dir: Path, wanted: Declared, find_links: list[str], no_index: bool, on_line: Callable[[str], None]
) -> None:
    """Run pip and npm into ``env_dir`` for ``wanted``, then write its manifest."""
    if wanted.python:
        requirements = env_dir / REQUIREMENTS_FILE
        requirements.write_text("\n".join(wanted.python) + "\n", encoding="utf-8")
        _run_tool(
            "pip install",
            _pip_argv(env_dir / "python", requirements, find_links, no_index),
            on_line,
        )
    if wanted.npm:
        npm = shutil.which("npm")
        if npm is None:
            raise InstallFailed("npm was not found: install Node.js's npm to install packages for JavaScript")
        (env_dir / "package.json").write_text(
            json.dumps({"name": "flowloom-sandbox-packages", "private": True}) + "\n", encoding="utf-8"
        )
        _run_tool("npm install", _npm_argv(npm, env_dir, wanted.npm, no_index), on_line)
    manifest = {
        "python": python_version(),
        "requirements": wanted.python,
        "npm": wanted.npm,
        "installed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    (env_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _activate(home: Path, env_dir: Path) -> str:
    """Point ``<home>/sandbox/packages`` at ``env_dir`` in one step; returns the name of
    the environment it pointed at before ("" when none)."""
    link = home / ACTIVE
    try:
        previous = Path(os.readlink(link)).name
    except OSError:
        previous = ""
    staged = home / f".{ACTIVE}-{secrets.token_hex(4)}"
    os.symlink(os.path.relpath(env_dir, home), staged)
    os.replace(staged, link)
    return previous


def _write_declarations(home: Path, wanted: Declared) -> None:
    for name, lines in ((REQUIREMENTS_FILE, wanted.python), (NPM_FILE, wanted.npm)):
        staged = home / f".{name}.new"
        staged.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(staged, home / name)


def _prune(home: Path, keep: set[str]) -> None:
    """Remove the environments other than the active one and the one before it."""
    for entry in (home / "envs").iterdir():
        if entry.name not in keep:
            shutil.rmtree(entry, ignore_errors=True)


def _npm_packages(node_modules: Path) -> list[dict[str, str]]:
    """Top-level packages of ``node_modules`` (scoped ones included), name and version."""
    found = []
    for candidate in sorted(node_modules.glob("*/package.json")) + sorted(
        node_modules.glob("@*/*/package.json")
    ):
        try:
            meta = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("name"):
            found.append({"name": str(meta["name"]), "version": str(meta.get("version", ""))})
    return found


def inventory(settings: Settings) -> dict[str, Any]:
    """What is declared and what the active environment holds, for ``flowloom sandbox list``:
    ``{"environment": path | None, "python_version", "installed_at", "problem",
    "declared": {"python": [...], "npm": [...]}, "pending": {...}, "python": [{name,
    version}], "npm": [{name, version}]}``. ``pending``: declared lines the active
    environment was not installed from (the declarations were edited since)."""
    env = package_env(settings)
    wanted = declared(settings)
    manifest = env.manifest or {}
    python = []
    if env.python is not None:
        for dist in metadata.distributions(path=[str(env.python)]):
            python.append({"name": str(dist.metadata["Name"]), "version": str(dist.version)})
    installed_from = Declared(list(manifest.get("requirements") or []), list(manifest.get("npm") or []))
    return {
        "environment": str(env.root) if env.root else None,
        "python_version": manifest.get("python"),
        "installed_at": manifest.get("installed_at"),
        "problem": env.problem,
        "declared": {"python": wanted.python, "npm": wanted.npm},
        "pending": {
            "python": [line for line in wanted.python if line not in installed_from.python],
            "npm": [spec for spec in wanted.npm if spec not in installed_from.npm],
        },
        "python": sorted(python, key=lambda d: d["name"].lower()),
        "npm": _npm_packages(env.node_modules) if env.node_modules else [],
    }
