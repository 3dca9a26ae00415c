"""Kernel confinement for one sandboxed run: namespaces, read-only mounts, Landlock, rlimits, guard.

Standard library only: the sandbox worker (`runner.py`) imports this file without marlang or
its dependencies. Every function here acts on the calling process and raises OSError on failure.

How a run at a namespace level is confined (one forked "job" process C, one program process G):

* C enters fresh mount, network, PID, IPC and UTS namespaces. Unprivileged, C first enters a
  fresh user namespace (mapping its own uid to root inside) so it may create the others; as
  real root, C creates them directly and G later drops to an unprivileged uid (see below).
* C makes mount propagation private, hides directories that may hold secrets or the project
  (home, cwd, /root, /home, /run, /var/tmp, /dev/shm, ...) under empty tmpfs mounts, binding
  the Python installation back in read-only where it lives inside one of them, then makes the
  whole tree read-only with one recursive mount_setattr(2) (per-mount bind remounts on kernels
  without it). A fresh size-capped tmpfs is mounted on /tmp as the program's working and home
  directory: the only writable place, gone when the namespace dies, nothing to clean up.
* G is PID 1 of the new PID namespace: killing it kills every process of the run. It mounts a
  private /proc (only the run's processes are visible), and when the worker runs as root it
  drops to uid/gid 65534 and enters a fresh user namespace of its own. RLIMIT_NPROC is counted
  per (user namespace, uid), so setting it after entering the fresh user namespace bounds this
  run's processes only - a fork bomb stops at `max_processes` without touching other jobs.
  Real root is exempt from RLIMIT_NPROC, which is why root drops to 65534 first.
* G then sets no_new_privs, applies Landlock where the kernel has it (writes only under the
  work directory, reads only from system and Python directories, no TCP, no signals or
  abstract-socket connections outside the run), and drops every capability including the
  bounding set, so the program cannot undo the mounts even though it is uid 0 inside.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
from collections.abc import Sequence

# The isolation levels, strongest first. Names are part of the public API and run manifests.
LEVELS: tuple[str, ...] = ("namespaces+landlock", "namespaces", "landlock", "rlimits")
NAMESPACE_LEVELS = frozenset({"namespaces+landlock", "namespaces"})
LANDLOCK_LEVELS = frozenset({"namespaces+landlock", "landlock"})

UNPRIVILEGED_ID = 65534  # "nobody": what a root-run worker's programs run as
WORKDIR_IN_NAMESPACE = "/tmp"

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# Syscall numbers >= 424 are shared by every Linux architecture.
SYS_MOUNT_SETATTR = 442
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2

LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
LL_EXECUTE = 1 << 0
LL_WRITE_FILE = 1 << 1
LL_READ_FILE = 1 << 2
LL_READ_DIR = 1 << 3
LL_REMOVE_DIR = 1 << 4
LL_REMOVE_FILE = 1 << 5
LL_MAKE_CHAR = 1 << 6
LL_MAKE_DIR = 1 << 7
LL_MAKE_REG = 1 << 8
LL_MAKE_SOCK = 1 << 9
LL_MAKE_FIFO = 1 << 10
LL_MAKE_BLOCK = 1 << 11
LL_MAKE_SYM = 1 << 12
LL_REFER = 1 << 13  # ABI 2
LL_TRUNCATE = 1 << 14  # ABI 3
LL_NET_BIND_TCP = 1 << 0  # ABI 4
LL_NET_CONNECT_TCP = 1 << 1
LL_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
LL_SCOPE_SIGNAL = 1 << 1

# Directories a program may read under Landlock: the system, devices, its own /proc, plus the
# Python installation and the work directory added at run time.
SYSTEM_READ_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                    "/dev", "/proc", "/sys")
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full")
# Hidden in namespace levels unless they contain the Python installation (then it is bound back).
FIXED_MASKS = ("/home", "/root", "/run", "/var/run", "/var/tmp", "/dev/shm", "/mnt", "/media",
               "/srv")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _b(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)),
           f"mount {fstype or source} on {target}")


def prctl(option: int, arg: int = 0, what: str = "prctl") -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), what)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    prctl(PR_SET_PDEATHSIG, sig, "prctl(PR_SET_PDEATHSIG)")


def set_child_subreaper() -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1, "prctl(PR_SET_CHILD_SUBREAPER)")


def set_no_new_privs() -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1, "prctl(PR_SET_NO_NEW_PRIVS)")


def set_dumpable(dumpable: bool) -> None:
    """Not dumpable: other processes of the same user cannot read this one's memory or open
    its /proc files (descriptors, environment)."""
    prctl(PR_SET_DUMPABLE, int(dumpable), "prctl(PR_SET_DUMPABLE)")


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_self_to_root(outer_uid: int, outer_gid: int) -> None:
    """Map the caller's own ids to root inside the user namespace it just entered."""
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"0 {outer_uid} 1")
    _write_file("/proc/self/gid_map", f"0 {outer_gid} 1")


# --------------------------------------------------------------------------- namespaces (C)

def enter_namespaces(as_root: bool) -> None:
    """Enter fresh mount/net/PID/IPC/UTS namespaces (and a user namespace when unprivileged)."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    uid, gid = os.geteuid(), os.getegid()
    if not as_root:
        flags |= CLONE_NEWUSER
    _check(_libc.unshare(flags), "unshare(user/mount/net/pid namespaces)")
    if not as_root:
        _map_self_to_root(uid, gid)


def _is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def plan_masks(candidates: list[str], keep: list[str], hide: Sequence[str] = ()) -> list[str]:
    """Directories to hide, parents first: existing, not '/', outermost only.

    A candidate inside a kept path is left alone (hiding it would hide part of the Python
    installation); a `hide` path (site-packages: data sets ship there) is hidden even there,
    unless a mask already covers it and no kept path shows it again."""
    def usable(raw: str) -> bool:
        return raw != "/" and os.path.isdir(raw) and raw != WORKDIR_IN_NAMESPACE

    chosen: list[str] = []
    for raw in sorted({os.path.realpath(c) for c in candidates if c}, key=len):
        if not usable(raw) or any(_is_within(raw, k) for k in keep):
            continue
        if any(_is_within(raw, c) for c in chosen):
            continue
        chosen.append(raw)
    extra: list[str] = []
    for raw in sorted({os.path.realpath(h) for h in hide if h}, key=len):
        if not usable(raw) or any(_is_within(raw, e) for e in extra):
            continue
        covered = any(_is_within(raw, c) for c in chosen)
        if covered and not any(_is_within(raw, k) for k in keep):
            continue
        extra.append(raw)
    return sorted(chosen + extra, key=len)


def _cover_with_tmpfs(target: str, options: str, keep_fds: dict[str, int]) -> None:
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for path, fd in keep_fds.items():
        if _is_within(path, target) and path != target:
            os.makedirs(path, mode=0o755, exist_ok=True)
            # A magic /proc/self/fd link reaches the directory hidden under the new tmpfs.
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)


def _mountinfo_points() -> list[tuple[str, int]]:
    """(mount point, flags a bind remount must keep) for every mount, parents first."""
    keep = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
            "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # \040 etc.
            flags = 0
            for opt in fields[5].split(","):
                flags |= keep.get(opt, 0)
            points.append((point, flags))
    return points


def make_tree_read_only() -> None:
    attr = (ctypes.c_uint64 * 4)(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    ret = _libc.syscall(SYS_MOUNT_SETATTR, ctypes.c_int(AT_FDCWD), b"/",
                        ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr),
                        ctypes.c_size_t(ctypes.sizeof(attr)))
    if ret == 0:
        return
    if ctypes.get_errno() != errno.ENOSYS:
        _check(ret, "mount_setattr(/, read-only, recursive)")
    for point, flags in _mountinfo_points():  # kernels before 5.12
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | flags)
        except FileNotFoundError:
            continue  # covered by a later mount


def setup_filesystem(masks: list[str], keep: list[str], work_mb: int, as_root: bool) -> None:
    """Private propagation, hidden directories, read-only tree, fresh writable tmpfs on /tmp."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep_fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep if os.path.isdir(p)}
    try:
        for target in masks:
            _cover_with_tmpfs(target, "size=1m,mode=0755", keep_fds)
        make_tree_read_only()
        owner = f",uid={UNPRIVILEGED_ID},gid={UNPRIVILEGED_ID}" if as_root else ""
        _cover_with_tmpfs(WORKDIR_IN_NAMESPACE, f"size={work_mb}m,mode=0700{owner}", keep_fds)
    finally:
        for fd in keep_fds.values():
            os.close(fd)


# --------------------------------------------------------------------------- PID 1 (G)

def mount_private_proc() -> str:
    """Mount a /proc showing only this PID namespace; hide /proc if that is refused."""
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        return "private"
    except OSError:
        # e.g. a container whose /proc has masked sub-paths: an empty /proc leaks nothing.
        mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
        return "hidden"


def become_unprivileged() -> None:
    """Root only: drop to uid/gid 65534, then enter a user namespace of our own (see module doc)."""
    os.setgroups([])
    os.setresgid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID)
    os.setresuid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID)
    # Changing uid clears "dumpable", which would make /proc/self/uid_map unwritable.
    prctl(PR_SET_DUMPABLE, 1, "prctl(PR_SET_DUMPABLE)")
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(user namespace)")
    _map_self_to_root(UNPRIVILEGED_ID, UNPRIVILEGED_ID)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except OSError:
        last = 40
    for cap in range(last + 1):
        ret = _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        if ret < 0 and ctypes.get_errno() != errno.EINVAL:
            _check(ret, f"prctl(PR_CAPBSET_DROP, {cap})")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset(empty)")


# --------------------------------------------------------------------------- Landlock

class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    ret = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return int(ret) if ret > 0 else 0


def apply_landlock(abi: int, workdir: str, read_dirs: list[str]) -> None:
    """Writes only under `workdir`, reads only under `read_dirs`; no TCP, signals scoped (ABI)."""
    write = (LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR | LL_MAKE_DIR
             | LL_MAKE_REG | LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_BLOCK | LL_MAKE_SYM)
    if abi >= 2:
        write |= LL_REFER
    if abi >= 3:
        write |= LL_TRUNCATE
    read = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
    file_rights = LL_EXECUTE | LL_READ_FILE | LL_WRITE_FILE | (LL_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(write | read, 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL
        size = 24
    ruleset = _check(_libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr),
                                   ctypes.c_size_t(size), ctypes.c_uint32(0)),
                     "landlock_create_ruleset")
    try:
        rules = [(p, read) for p in read_dirs] + [(workdir, write | read)]
        rules += [(p, LL_READ_FILE | LL_WRITE_FILE | (LL_TRUNCATE if abi >= 3 else 0))
                  for p in WRITABLE_DEVICES]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # e.g. no /lib32 on this machine
            try:
                if not os.path.isdir(path):
                    rights &= file_rights
                beneath = _PathBeneathAttr(rights, fd)
                _check(_libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                                     ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                                     ctypes.byref(beneath), ctypes.c_uint32(0)),
                       f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        set_no_new_privs()
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset),
                             ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


# --------------------------------------------------------------------------- seccomp

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
X32_SYSCALL_BIT = 0x40000000
# (audit arch, {syscall: number}) per machine: the calls no program needs and no level allows:
# opening a socket of any family (only socketpair(2), which reaches nothing, stays), reading or
# writing another process's memory, and io_uring, which can open sockets by itself.
_SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, {"socket": 41, "ptrace": 101, "process_vm_readv": 310,
                            "process_vm_writev": 311, "io_uring_setup": 425}),
    "aarch64": (0xC00000B7, {"socket": 198, "ptrace": 117, "process_vm_readv": 270,
                             "process_vm_writev": 271, "io_uring_setup": 425}),
}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def deny_sockets() -> bool:
    """Install a seccomp filter that refuses socket(2), ptrace and io_uring (EPERM) for this
    process and everything it starts, and kills a call made through another ABI. Needs
    no_new_privs. False where this machine's architecture is not known here (nothing done)."""
    arch = _SECCOMP_ARCHES.get(os.uname().machine)
    if arch is None:
        return False
    audit_arch, numbers = arch
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    program = [(ld_abs, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, SECCOMP_RET_KILL_PROCESS),
               (ld_abs, 0, 0, 0)]
    checks = [(jge, X32_SYSCALL_BIT)] if audit_arch == 0xC000003E else []
    checks += [(jeq, number) for number in sorted(numbers.values())]
    deny_at = len(program) + len(checks) + 1  # after the checks and the "allow"
    for code, k in checks:
        program.append((code, deny_at - len(program) - 1, 0, k))
    program.append((ret, 0, 0, SECCOMP_RET_ALLOW))
    program.append((ret, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    filters = (_SockFilter * len(program))(*(_SockFilter(*insn) for insn in program))
    fprog = _SockFprog(len(program), filters)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
           "prctl(PR_SET_SECCOMP)")
    return True


# --------------------------------------------------------------------------- rlimits

def apply_rlimits(cpu_seconds: float, memory_mb: int, file_size_mb: int,
                  nproc: int | None) -> None:
    cpu = max(1, int(-(-cpu_seconds // 1)))  # whole seconds, rounded up
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = file_size_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = 256 if hard == resource.RLIM_INFINITY else min(256, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def count_user_tasks(uid: int) -> int:
    """Tasks (threads included) of `uid` on the machine: RLIMIT_NPROC's count without namespaces."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue
    return count


# --------------------------------------------------------------------------- guard

class GuardBlocked(PermissionError):
    """Raised by a function the rlimits level's in-process guard has disabled."""


def install_guard(workdir: str) -> None:
    """Best-effort in-process guard for the weakest level. NOT a security boundary.

    Disables process, signal and network calls and refuses writes or deletions outside
    `workdir`, so well-meaning but careless code cannot do damage. Code that means harm can get
    around it (ctypes, gc, re-importing), which is why the stronger levels exist.
    """
    import builtins
    import io
    import shutil
    import socket
    import subprocess

    root = os.path.realpath(workdir)
    allowed_files = {os.devnull}

    def inside(path) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor
        try:
            real = os.path.realpath(os.fsdecode(os.fspath(path)))
        except TypeError:
            return False
        return real in allowed_files or _is_within(real, root)

    def blocked(name: str):
        def refuse(*args, **kwargs):
            raise GuardBlocked(f"{name} is disabled by the marlang sandbox guard")
        return refuse

    def confined(name: str, func, n_paths: int = 1):
        def check(*args, **kwargs):
            for path in args[:n_paths]:
                if not inside(path):
                    raise GuardBlocked(f"{name} outside the sandbox work directory: {path!r}")
            return func(*args, **kwargs)
        return check

    real_open, real_os_open = builtins.open, os.open

    def guarded_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and not inside(file):
            raise GuardBlocked(f"writing outside the sandbox work directory: {file!r}")
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path, flags, *args, **kwargs):
        writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        if flags & writing and not inside(path):
            raise GuardBlocked(f"writing outside the sandbox work directory: {path!r}")
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = io.open = guarded_open
    os.open = guarded_os_open
    for name in ("remove", "unlink", "rmdir", "removedirs", "mkdir", "makedirs", "truncate",
                 "chmod", "chown", "lchown", "utime", "mkfifo", "mknod"):
        if hasattr(os, name):
            setattr(os, name, confined(f"os.{name}", getattr(os, name)))
    for name in ("rename", "renames", "replace", "link", "symlink"):
        setattr(os, name, confined(f"os.{name}", getattr(os, name), n_paths=2))
    shutil.rmtree = confined("shutil.rmtree", shutil.rmtree)
    shutil.move = confined("shutil.move", shutil.move, n_paths=2)
    for name in ("kill", "killpg", "fork", "forkpty", "setsid", "setpgid", "setpgrp", "system",
                 "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
                 "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle",
                 "posix_spawn", "posix_spawnp", "pidfd_open", "chroot", "setuid", "seteuid",
                 "setreuid", "setresuid", "fchdir", "fchmod", "fchown"):
        if hasattr(os, name):
            setattr(os, name, blocked(f"os.{name}"))
    signal.pthread_kill = blocked("signal.pthread_kill")
    subprocess.Popen = blocked("subprocess.Popen")  # type: ignore[misc]
    for name in ("run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"):
        setattr(subprocess, name, blocked(f"subprocess.{name}"))
    socket.socket = blocked("socket.socket")  # type: ignore[misc]
    for name in ("create_connection", "create_server", "socketpair", "fromfd"):
        setattr(socket, name, blocked(f"socket.{name}"))
