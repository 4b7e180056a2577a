"""The command lines of a sandboxed run (:mod:`nodes.sandbox.process` starts them): the host
binaries it uses, the interpreter, ``prlimit`` and bubblewrap around it, and the
environment the code sees.

Isolation (``mode="bwrap"``, :func:`bwrap_argv`), with bubblewrap:

- new network namespace (and a seccomp filter that refuses every socket family but
  ``AF_UNIX``, so not even the sandbox's own loopback can be used), new PID, IPC,
  UTS and (where possible) cgroup namespaces; ``--die-with-parent``, ``--new-session``.
- filesystem: a read-only root made of read-only binds of ``/usr`` (plus the
  ``/bin``, ``/lib*``, ``/sbin`` links or dirs), the dynamic loader cache and the
  time zone from ``/etc``, the Python prefix (``sys.base_prefix``, e.g. a pyenv
  install) and Node's prefix when they live outside ``/usr``; a fresh ``/proc`` and
  minimal ``/dev``; a size-capped tmpfs at :data:`WORKDIR` (the working directory)
  and at ``/tmp`` - the only writable paths, gone when the sandbox ends.
- ``--clearenv`` and only ``PATH``, ``HOME`` (the working dir), ``LANG``, the
  thread caps and ``NODE_PATH`` below (:func:`sandbox_env`): no inherited variable
  (secret) reaches the code.
- the code runs as an unprivileged user with no capabilities and ``no_new_privs``.
  When the engine runs as root, bwrap sets the sandbox up as root without a user
  namespace (run as root, bwrap would leave the code every capability, and in a user
  namespace the code would still be uid 0 on the host, which ``RLIMIT_NPROC`` never
  limits), then ``setpriv`` drops to a throw-away uid from :data:`SANDBOX_UIDS` (one
  per sandbox, so ``RLIMIT_NPROC`` counts that sandbox alone) with every capability
  and the bounding set cleared. Otherwise bwrap uses a user namespace, where
  ``RLIMIT_NPROC`` counts the namespace's processes.
- the seccomp filter (:func:`seccomp_filter`, built in :mod:`nodes.sandbox.seccomp`,
  re-exported here) also refuses new namespaces (``unshare``, ``setns``, ``clone`` with
  namespace flags; ``clone3`` reports ``ENOSYS`` so libc falls back to ``clone``),
  io_uring, ``bpf``, ``perf_event_open``, ``userfaultfd``, the kernel keyring and, on
  x86-64, the x32 and i386 syscall ABIs.
- packages: the operator's package environment (:mod:`engine.code_packages`,
  installed by ``flowloom sandbox install``), when there is one, is bound read-only
  at :data:`~engine.code_packages.SANDBOX_PYTHON` (the Python runner appends it to
  ``sys.path`` with :func:`site.addsitedir`: the interpreter runs isolated, ``-I``,
  which ignores ``PYTHONPATH``; appended, so no package can shadow a standard module)
  and :data:`~engine.code_packages.SANDBOX_NODE_MODULES` (``NODE_PATH``, where
  ``require`` looks after the working directory). Nothing in it is writable, and the
  code can install nothing: there is no network.
- the thread pools of numeric libraries (OpenBLAS, OpenMP, MKL, numexpr) are told to
  use one thread: they size them by the host's CPUs, which ``RLIMIT_NPROC`` and the
  memory limit would refuse on a large machine.

Resource limits (``prlimit`` inside the sandbox, right before the interpreter):
``RLIMIT_CPU`` (``ceil(timeout) + 1`` s soft, one more hard), memory (Python:
``RLIMIT_AS`` = ``memory_mb``; Node: ``--max-old-space-size=memory_mb`` for the V8 heap
and ``RLIMIT_DATA`` = ``memory_mb`` + :data:`NODE_RUNTIME_MB` for everything else -
V8 reserves far more address space than it uses, so ``RLIMIT_AS`` would stop Node
from starting), ``RLIMIT_NPROC`` (:data:`MAX_TASKS`, threads included),
``RLIMIT_NOFILE``, ``RLIMIT_FSIZE`` and no core dumps.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Literal

from engine.code_packages import SANDBOX_NODE_MODULES, SANDBOX_PYTHON, package_env
from engine.settings import Settings

from .runners import JS_RUNNER, PYTHON_RUNNER

__all__ = [
    "MAX_TASKS",
    "SANDBOX_UIDS",
    "THREAD_CAPS",
    "WORKDIR",
    "Limits",
    "Tools",
    "bwrap_argv",
    "interpreter_argv",
    "prlimit_argv",
    "sandbox_env",
    "site_dirs",
    "tools_for",
    "which",
]

Language = Literal["python", "javascript"]

#: The working directory inside the sandbox (a tmpfs; also ``HOME``).
WORKDIR = "/sandbox"
#: Size of each writable tmpfs (the working directory and ``/tmp``), and ``RLIMIT_FSIZE``.
SCRATCH_BYTES = 64 * 1024 * 1024
#: ``RLIMIT_NPROC``: processes *and threads* of the sandbox user (Node starts ~7 threads).
MAX_TASKS = 32
#: ``RLIMIT_NOFILE``.
MAX_OPEN_FILES = 256
#: Node: ``RLIMIT_DATA`` headroom over ``memory_mb`` for thread stacks, code and buffers.
NODE_RUNTIME_MB = 64
#: Uids used when the engine is root (one drawn per sandbox; no passwd entry needed).
SANDBOX_UIDS = range(900_000, 965_536)
#: Variables that cap numeric libraries' thread pools (see the module doc).
THREAD_CAPS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-run limits: wall ``timeout`` (s), ``memory_mb`` (MiB), ``max_output_bytes``."""

    timeout: float = 10.0
    memory_mb: int = 256
    max_output_bytes: int = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Tools:
    """What a run needs from the host (absolute paths): the interpreters and helpers, and
    the package environment's module directories (``python_packages``, ``node_modules``;
    None when nothing is installed)."""

    python: str
    python_prefix: str
    node: str | None
    prlimit: str | None
    setpriv: str | None
    python_packages: str | None = None
    node_modules: str | None = None


def which(name: str) -> str | None:
    """The absolute path of executable ``name`` (a name on ``PATH`` or a path), or None."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    found = shutil.which(name)
    return os.path.realpath(found) if found else None


def tools_for(settings: Settings) -> Tools:
    """The host binaries and the active package environment for a run with ``settings``."""
    # The base interpreter (a venv's python is a link to it), run with -I -S: stdlib only
    # plus the package environment the runner adds.
    python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    env = package_env(settings)
    return Tools(
        python=python,
        python_prefix=os.path.realpath(sys.base_prefix),
        node=which(settings.code_node),
        prlimit=which("prlimit"),
        setpriv=which("setpriv"),
        python_packages=str(env.python) if env.python else None,
        node_modules=str(env.node_modules) if env.node_modules else None,
    )


def sandbox_env(tools: Tools, *, sandboxed: bool) -> dict[str, str]:
    """The code's whole environment: ``PATH``, ``LANG``, one-thread caps for numeric
    libraries and, with an installed ``node_modules``, ``NODE_PATH`` (its path in the
    sandbox, or on the host when ``sandboxed`` is False). ``HOME`` is the caller's."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **dict.fromkeys(THREAD_CAPS, "1")}
    if tools.node_modules:
        env["NODE_PATH"] = SANDBOX_NODE_MODULES if sandboxed else tools.node_modules
    return env


def site_dirs(tools: Tools, *, sandboxed: bool) -> list[str]:
    """The directories the Python runner adds to ``sys.path`` (the package environment's
    modules, in the sandbox or on the host)."""
    if not tools.python_packages:
        return []
    return [SANDBOX_PYTHON if sandboxed else tools.python_packages]


def _prefix_of(binary: str) -> str:
    """``/opt/node/bin/node`` -> ``/opt/node`` (the install prefix to bind)."""
    return os.path.dirname(os.path.dirname(binary))


def _under_usr(path: str) -> bool:
    return path == "/usr" or path.startswith("/usr/")


def interpreter_argv(language: Language, tools: Tools, limits: Limits, result_fd: int) -> list[str]:
    """The interpreter command line running the runner (no limits, no sandbox)."""
    if language == "python":
        return [tools.python, "-I", "-S", "-B", "-c", PYTHON_RUNNER, str(result_fd)]
    assert tools.node is not None
    return [tools.node, f"--max-old-space-size={limits.memory_mb}", "-e", JS_RUNNER, str(result_fd)]


def prlimit_argv(language: Language, tools: Tools, limits: Limits, *, nproc: bool) -> list[str]:
    """``prlimit --cpu=... --as|--data=... ... --`` for ``limits`` (see the module doc)."""
    assert tools.prlimit is not None
    cpu = math.ceil(limits.timeout) + 1
    memory = (
        f"--as={limits.memory_mb * _MIB}"
        if language == "python"
        else f"--data={(limits.memory_mb + NODE_RUNTIME_MB) * _MIB}"
    )
    argv = [
        tools.prlimit,
        f"--cpu={cpu}:{cpu + 1}",
        memory,
        f"--nofile={MAX_OPEN_FILES}",
        f"--fsize={SCRATCH_BYTES}",
        "--core=0",
    ]
    if nproc:
        argv.append(f"--nproc={MAX_TASKS}")
    return argv + ["--"]


def bwrap_argv(
    bwrap: str, tools: Tools, inner: list[str], *, seccomp_fd: int | None, as_root: bool, uid: int
) -> list[str]:
    """The bubblewrap command line around ``inner`` (see the module doc for the design)."""
    argv = [bwrap, *_namespaces(tools, as_root), *_mounts(tools), *_scratch()]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv.append("--")
    if as_root:
        # Root only sets the sandbox up: the code runs as a throw-away uid with no capabilities.
        assert tools.setpriv is not None
        argv += [tools.setpriv, "--reuid", str(uid), "--regid", str(uid), "--clear-groups"]
        argv += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return argv + inner


def _namespaces(tools: Tools, as_root: bool) -> list[str]:
    """New network, pid, ipc, uts and cgroup namespaces, a fresh session dying with its
    parent, and only the sandbox's environment."""
    argv = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    argv += ["--setenv", "HOME", WORKDIR]
    for name, value in sandbox_env(tools, sandboxed=True).items():
        argv += ["--setenv", name, value]
    if not as_root:
        # Unprivileged: bwrap needs a user namespace (it drops every capability in it).
        argv.append("--unshare-user")
    return argv


def _mounts(tools: Tools) -> list[str]:
    """Read-only binds of /usr, the top-level library folders, the few /etc files the
    loader reads, the interpreters' prefixes and the packages the code may import."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    # bwrap creates missing parents of a mount point as 0700 root: make them traversable.
    made: set[str] = set()

    def parents(path: str) -> list[str]:
        out: list[str] = []
        parent = os.path.dirname(path)
        while parent not in ("/", "") and parent not in made:
            made.add(parent)
            out = ["--perms", "0755", "--dir", parent] + out
            parent = os.path.dirname(parent)
        return out

    for etc in ("/etc/ld.so.cache", "/etc/localtime"):
        argv += parents(etc) + ["--ro-bind-try", etc, etc]
    extra = {tools.python_prefix}
    if tools.node:
        extra.add(_prefix_of(tools.node))
    for prefix in sorted(extra):
        if not _under_usr(prefix) and prefix != "/":
            argv += parents(prefix) + ["--ro-bind", prefix, prefix]
    for host, inside in ((tools.python_packages, SANDBOX_PYTHON), (tools.node_modules, SANDBOX_NODE_MODULES)):
        if host:
            argv += parents(inside) + ["--ro-bind", host, inside]
    return argv


def _scratch() -> list[str]:
    """/proc, /dev, size-capped writable /tmp and working folder, the rest read-only."""
    size = str(SCRATCH_BYTES)
    argv = ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    argv += ["--perms", "0777", "--size", size, "--tmpfs", WORKDIR]
    return argv + ["--remount-ro", "/", "--chdir", WORKDIR]
