"""The seccomp filter of the bubblewrap sandbox (:mod:`nodes.sandbox.process`), a classic-BPF program.

:func:`seccomp_filter` assembles it for x86-64 or aarch64; bwrap loads it from a pipe
(``--seccomp FD``). It refuses sockets of any family but ``AF_UNIX``, new namespaces,
io_uring, ``bpf``, ``perf_event_open``, ``userfaultfd`` and the kernel keyring, and kills a
process making a syscall of another ABI. Re-exported by :mod:`nodes.sandbox.process`.
"""

from __future__ import annotations

import os
import struct

__all__ = ["seccomp_filter"]

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name -> (x86_64, aarch64) syscall numbers
_SYSCALLS = {
    "socket": (41, 198),
    "clone": (56, 220),
    "clone3": (435, 435),
    "unshare": (272, 97),
    "setns": (308, 268),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
}
_REFUSED = (
    "unshare",
    "setns",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
)
_CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_AF_UNIX = 1
_EPERM, _ENOSYS = 1, 38
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The classic-BPF seccomp program bwrap loads (``--seccomp FD``); None on unknown machines.

    Refuses (``EPERM``): sockets of any family but ``AF_UNIX``, new namespaces, io_uring,
    bpf, perf events, userfaultfd and the keyring; ``clone3`` gets ``ENOSYS`` (its
    flags live in memory a filter cannot read; libc then uses ``clone``). A syscall of
    another architecture (e.g. i386 ``int 0x80`` on x86-64) kills the process.
    """
    machine = machine or os.uname().machine
    if machine not in _AUDIT_ARCH:
        return None
    col = 0 if machine == "x86_64" else 1
    nr = {name: nums[col] for name, nums in _SYSCALLS.items()}
    # (code, k, jump-if-true label, jump-if-false label); a label resolves to a forward
    # offset (classic BPF jumps forward only), None to the next instruction.
    prog: list[tuple[int, int, str | None, str | None]] = []
    labels: dict[str, int] = {}

    def emit(code: int, k: int, jt: str | None = None, jf: str | None = None) -> None:
        prog.append((code, k, jt, jf))

    emit(_LD_ABS_W, 4)  # seccomp_data.arch
    emit(_JEQ, _AUDIT_ARCH[machine], None, "kill")
    emit(_LD_ABS_W, 0)  # seccomp_data.nr
    if machine == "x86_64":
        emit(_JGE, 0x40000000, "eperm", None)  # the x32 ABI
    for name in _REFUSED:
        emit(_JEQ, nr[name], "eperm", None)
    emit(_JEQ, nr["clone3"], "enosys", None)
    emit(_JEQ, nr["socket"], "socket", None)
    emit(_JEQ, nr["clone"], "clone", None)
    emit(_RET, _RET_ALLOW)
    labels["socket"] = len(prog)
    emit(_LD_ABS_W, 16)  # low 32 bits of args[0] (little-endian): the address family
    emit(_JEQ, _AF_UNIX, None, "eperm")
    emit(_RET, _RET_ALLOW)
    labels["clone"] = len(prog)
    emit(_LD_ABS_W, 16)  # clone flags
    emit(_JSET, _CLONE_NEW_FLAGS, "eperm", None)
    emit(_RET, _RET_ALLOW)
    labels["eperm"] = len(prog)
    emit(_RET, _RET_ERRNO | _EPERM)
    labels["enosys"] = len(prog)
    emit(_RET, _RET_ERRNO | _ENOSYS)
    labels["kill"] = len(prog)
    emit(_RET, _RET_KILL_PROCESS)

    out = bytearray()
    for i, (code, k, jt, jf) in enumerate(prog):
        t = labels[jt] - i - 1 if jt else 0
        f = labels[jf] - i - 1 if jf else 0
        if code == _RET and (jt or jf):  # pragma: no cover - assembler misuse
            raise AssertionError("return with jumps")
        out += struct.pack("=HBBI", code, t, f, k)
    return bytes(out)
