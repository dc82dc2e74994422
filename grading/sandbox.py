"""A sandbox for the learner's kernel: bubblewrap around the one process that runs learner code.

nbgrader itself (which restores the tests and writes the gradebook) stays outside, trusted. When
the grading worker sets ``$SHARDBOOK_SANDBOX`` (``grading.protocol.SANDBOX_ENV``), nbgrader starts each
notebook's kernel through
:class:`SandboxedKernelManager` (wired in ``grading/nbgrader_config.py``), which runs the kernel:

* as a uid of its own (when grading as root: one per notebook graded at the same time), under a
  process limit (``RLIMIT_NPROC``, which counts threads) and the address-space cap the worker set;
* in bubblewrap with its own network (none: not even the host's localhost), pid, IPC and UTS
  namespaces (as root, no user namespace: the kernel's uid must be a real one for the process limit to
  count it), a private ``/proc``, a minimal ``/dev``, a private ``/tmp`` that holds ``$HOME``, and a
  new terminal session;
* seeing, read-only, the system (``/usr``, ``/etc`` …), Python and its virtual environment, and of
  the course only what it must import: ``shardbook/``, ``grading/__init__.py``, ``grading/tamper.py``,
  ``grading/graders/`` and ``exercises/<assignment>/``. Writable: the notebook's own folder (its
  working directory) and a runtime folder of its own holding its connection file and unix sockets.
  Nothing else of the course (solutions, gradebook, other learners' folders, reports) exists inside;
* with a minimal environment (PATH, PYTHONPATH to the course root, HOME, MPLCONFIGDIR, locale, and the
  ``XLA_FLAGS`` / ``JAX_*`` / ``SHARDBOOK_*`` settings the notebooks read).

The kernel talks to nbgrader over unix sockets (jupyter_client's ``ipc`` transport) in that runtime
folder, so it needs no network. Results leave the sandbox only as messages to nbgrader, which writes
the executed notebook. When the kernel has stopped, its folder is cleaned of links and special files
(which the trusted nbgrader would otherwise follow when it writes there) and handed back to the
folder's owner.

Inside the sandbox a few lines of Python drop to the sandbox uid, forbid regaining privileges and set
the process limit before they become the kernel (a trampoline, not ``preexec_fn``).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import weakref

from grading.protocol import COURSE_ROOT_ENV, GRADING_ONLY_ENV, NPROC_ENV, SANDBOX_ENV, UID_ENV

BWRAP = "bwrap"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)

#: Uids handed to kernels when grading as root: no account uses this range. A batch takes a block of
#: 64 after it by its process id, so two batches graded at once on one machine do not share a uid.
UID_BASE = 2_000_000_000
#: Threads and processes a kernel may have at once: room for a graded notebook's peak (measured in
#: the README's sandbox section; JAX's thread pools grow with the core count); a fork bomb stops here.
NPROC_PER_CPU = 8
NPROC_FLOOR = 256
#: Size of the kernel's private /tmp (it holds $HOME too).
TMP_BYTES = 512 * 2**20

# What of the course the kernel sees, read-only (exercises/<assignment>/ is added per notebook).
COURSE_READ_ONLY = (
    "shardbook",
    "grading/__init__.py",
    "grading/tamper.py",
    "grading/protocol.py",  # tamper.py's Tampering
    "grading/graders",
)
SYSTEM_READ_ONLY = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Environment the kernel keeps, by name or prefix; everything else is dropped.
KEEP_ENV = ("LANG", "LANGUAGE", "TZ", "MPLBACKEND", "XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "OMP_NUM_THREADS")
KEEP_ENV_PREFIXES = ("LC_", "JAX_", "SHARDBOOK_")
# Grading's own settings for nbgrader, which the kernel has no use for.
DROP_ENV = GRADING_ONLY_ENV


def missing(course_root: str | None = None) -> str | None:
    """Why kernels cannot be sandboxed on this machine (an instruction), or None when they can.

    With ``course_root`` (grading as root), also checks that the course files the kernel imports are
    readable by other users, which the kernel's uid is.
    """
    if shutil.which(BWRAP) is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    if course_root and os.geteuid() == 0:
        for name in COURSE_READ_ONLY:
            for path in _walk(os.path.join(course_root, name)):
                mode = os.stat(path).st_mode
                need = 0o005 if stat.S_ISDIR(mode) else 0o004
                if mode & need != need:
                    return (
                        f"{path} cannot be read by other users, as the sandboxed kernel must: "
                        f"chmod -R o+rX {os.path.join(course_root, name)}"
                    )
    uid = _batch_uid(0) if os.geteuid() == 0 else None
    probe = command(
        [sys.executable, "-I", "-S", "-c", "pass"],
        cwd=None,
        course_root=None,
        assignment=None,
        runtime_dir=None,
        uid=uid,
        nproc=nproc_limit(),
    )
    proc = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return (
            "bubblewrap is installed but could not start a sandbox here (unprivileged user namespaces may "
            f"be disabled: sysctl kernel.unprivileged_userns_clone=1): {proc.stderr.strip()[-400:]}"
        )
    return None


def _walk(path: str):
    if not os.path.exists(path):
        return
    yield path
    for parent, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            yield os.path.join(parent, name)


def nproc_limit() -> int:
    """The process limit of one kernel: room for JAX's and the kernel's threads, little for a fork bomb."""
    return max(NPROC_FLOOR, NPROC_PER_CPU * (os.cpu_count() or 1))


def _batch_uid(slot: int) -> int:
    return UID_BASE + (os.getpid() % 500_000) * 64 + slot % 64


def kernel_env(slot: int = 0) -> dict[str, str]:
    """Environment for one nbgrader run whose kernel is sandboxed; ``slot``: which of the notebooks
    graded at the same time (each slot gets its own uid, so one learner's fork bomb cannot use up
    another's process limit)."""
    env = {SANDBOX_ENV: "1", NPROC_ENV: str(nproc_limit())}
    if os.geteuid() == 0:
        env[UID_ENV] = str(_batch_uid(slot))
    return env


def _user_tasks(uid: int) -> int:
    """How many threads the user ``uid`` has now (RLIMIT_NPROC counts these)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count


# The first step inside the sandbox: become the sandbox uid (when grading as root), forbid gaining
# privileges again, limit processes, then become the kernel. (Inside rather than before bwrap: as root,
# bwrap can bind a virtual environment under a home folder the sandbox uid may not enter.)
_ENTER = (
    "import ctypes, os, resource, sys; uid, limit = int(sys.argv[1]), int(sys.argv[2])\n"
    "if uid >= 0: os.setgroups([]); os.setgid(uid); os.setuid(uid)\n"
    "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS\n"
    "resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit)); os.execv(sys.argv[3], sys.argv[3:])"
)


def command(
    kernel_cmd: list[str],
    *,
    cwd: str | None,
    course_root: str | None,
    assignment: str | None,
    runtime_dir: str | None,
    uid: int | None,
    nproc: int,
) -> list[str]:
    """The bwrap command line that runs ``kernel_cmd`` sandboxed (see the module docstring).

    ``uid``: the uid to run as (grading as root), or None to stay this user; ``nproc``: the process
    limit of one kernel (as this user, what the user runs already is added: the limit counts them all).
    """
    if uid is None:
        # Unprivileged bwrap makes a user namespace (--unshare-all); the limit counts all of our tasks.
        limit = _user_tasks(os.getuid()) + nproc
        argv = [shutil.which(BWRAP) or BWRAP, "--unshare-all"]
    else:
        # As root, bwrap mounts without a user namespace, so that the kernel's uid is a real one,
        # which RLIMIT_NPROC counts (it exempts root, also root of a user namespace).
        limit = nproc
        argv = [shutil.which(BWRAP) or BWRAP, "--unshare-ipc", "--unshare-pid", "--unshare-net"]
        argv += ["--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    # jupyter_client tells the kernel its parent's pid, which means nothing in the sandbox's pid
    # namespace (the kernel would think its parent died). 1 (the sandbox's init) turns that watch off;
    # --die-with-parent does its job here.
    argv += ["--setenv", "JPY_PARENT_PID", "1"]
    for path in SYSTEM_READ_ONLY:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            argv += ["--symlink", os.readlink(path), path]
        else:
            argv += ["--ro-bind-try", path, path]
    # A private /tmp holding $HOME, writable by the kernel's uid (bwrap makes them as root).
    argv += ["--dev", "/dev", "--proc", "/proc"]
    argv += [
        "--perms",
        "1777",
        "--size",
        str(TMP_BYTES),
        "--tmpfs",
        "/tmp",
        "--perms",
        "0777",
        "--dir",
        "/tmp/home",
    ]
    # Binds come after the tmpfs on /tmp, so a course or a runtime folder under /tmp stays visible;
    # each is at the same path inside as outside.
    prefixes = {sys.base_prefix, sys.prefix, os.path.realpath(sys.prefix)}
    prefixes.add(os.path.dirname(os.path.realpath(sys.executable)))
    read_only = [p for p in prefixes if not p.startswith(SYSTEM_READ_ONLY)]
    if course_root:
        read_only += [os.path.join(course_root, name) for name in COURSE_READ_ONLY if name != "shardbook"]
        read_only.append(_shardbook_dir(course_root))
        if assignment and os.path.isdir(os.path.join(course_root, "exercises", assignment)):
            read_only.append(os.path.join(course_root, "exercises", assignment))
    read_only = [p for p in read_only if os.path.exists(p)]
    # A folder inside another bound one comes with it.
    read_only = sorted({p for p in read_only if not any(_inside(p, q) for q in read_only if q != p)})
    writable = [p for p in (runtime_dir, cwd) if p and os.path.isdir(p)]
    # The folders leading to each bind, readable by the kernel (bwrap would make them root-only).
    parents = set()
    for path in read_only + writable:
        parent = os.path.dirname(path)
        while parent not in ("/", "/tmp") and not any(_inside(parent, q) for q in read_only):
            parents.add(parent)
            parent = os.path.dirname(parent)
    for parent in sorted(parents):
        argv += ["--perms", "0755", "--dir", parent]
    for path in read_only:
        argv += ["--ro-bind", path, path]
    for path in writable:
        argv += ["--bind", path, path]
    argv += ["--chdir", cwd or "/tmp/home", "--"]
    enter = [sys.executable, "-I", "-S", "-c", _ENTER, str(-1 if uid is None else uid), str(limit)]
    return argv + enter + list(kernel_cmd)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _shardbook_dir(course_root: str) -> str:
    """The helper package the kernel imports: the course's own, else the one nbgrader would import."""
    own = os.path.join(course_root, "shardbook")
    if os.path.isdir(own):
        return own
    import importlib.util

    spec = importlib.util.find_spec("shardbook")
    if spec is None or not spec.submodule_search_locations:
        return own
    return os.path.abspath(list(spec.submodule_search_locations)[0])


def _python_path(course_root: str) -> str:
    """PYTHONPATH of the kernel: the course root, and the folder holding the helper package."""
    paths = [course_root, os.path.dirname(_shardbook_dir(course_root))]
    return os.pathsep.join(dict.fromkeys(paths))


def minimal_env(env: dict[str, str], course_root: str) -> dict[str, str]:
    kept = {
        k: v
        for k, v in env.items()
        if (k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)) and k not in DROP_ENV
    }
    bin_dir = os.path.dirname(sys.executable)
    kept.update(
        PATH=os.pathsep.join([bin_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
        PYTHONPATH=_python_path(course_root),
        HOME="/tmp/home",
        MPLCONFIGDIR="/tmp/home/.matplotlib",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return kept


def _chown_tree(path: str, uid: int, gid: int) -> None:
    """Hands a folder the kernel writes in to ``uid``, never following links."""
    os.lchown(path, uid, gid)
    for parent, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(parent, name), uid, gid)


def _reclaim(path: str, owner: tuple[int, int] | None) -> list[str]:
    """After the kernel stopped: removes links and special files from its folder (nbgrader, outside the
    sandbox, would follow a link when it writes there) and gives everything back to ``owner`` (uid,
    gid) if given. Returns what was removed."""
    removed: list[str] = []
    if not os.path.isdir(path) or os.path.islink(path):
        return removed
    for parent, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(parent, name)
            mode = os.lstat(full).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                os.unlink(full)
                removed.append(full)
    if owner:
        _chown_tree(path, *owner)
    return removed


@functools.cache
def _kernel_manager_class():
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        """jupyter_client's kernel manager, starting the kernel in the sandbox described above.

        Each kernel gets a runtime folder of its own (its connection file carries the key that signs
        messages) and talks over unix sockets in it.
        """

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._runtime_dir = tempfile.mkdtemp(prefix="sbk-")  # short: unix socket paths are <108 bytes
            # Removed with the kernel (below), or at the latest when nbgrader exits (a failed start).
            weakref.finalize(self, shutil.rmtree, self._runtime_dir, True)
            self.transport = "ipc"
            self.connection_file = os.path.join(self._runtime_dir, "kernel.json")
            self.ip = os.path.join(self._runtime_dir, "ipc")
            self._owner: tuple[int, int] | None = None
            self._cwd: str | None = None

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            course_root = os.environ.get(COURSE_ROOT_ENV) or os.getcwd()
            cwd = os.path.abspath(kw.get("cwd") or os.getcwd())
            uid = int(os.environ[UID_ENV]) if os.environ.get(UID_ENV) else None
            self._cwd = cwd
            if uid is not None:
                info = os.stat(os.path.dirname(cwd))  # what nbgrader made: it gets the folder back
                self._owner = (info.st_uid, info.st_gid)
                _chown_tree(cwd, uid, uid)
                _chown_tree(self._runtime_dir, uid, uid)
            sandboxed = command(
                list(kernel_cmd),
                cwd=cwd,
                course_root=course_root,
                assignment=os.path.basename(cwd),  # nbgrader runs autograded/<learner>/<assignment>/
                runtime_dir=self._runtime_dir,
                uid=uid,
                nproc=int(os.environ.get(NPROC_ENV) or nproc_limit()),
            )
            kw["env"] = minimal_env(kw.get("env") or dict(os.environ), course_root)
            # A new session in the sandbox: SIGINT to bwrap's process group would not reach the kernel,
            # so interrupts (a cell past its time limit) go as a message on the control channel.
            if self.kernel_spec is None:  # pre_start_kernel reads it before any launch
                raise RuntimeError("no kernel spec to start the sandboxed kernel from")
            self.kernel_spec.interrupt_mode = "message"
            return await super()._async_launch_kernel(sandboxed, **kw)

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if restart:
                return
            if self._cwd:
                _reclaim(self._cwd, self._owner)
            shutil.rmtree(self._runtime_dir, ignore_errors=True)

    return SandboxedKernelManager


def __getattr__(name: str):
    # jupyter_client is imported only when the class is asked for, so the launcher stays stdlib-only.
    if name == "SandboxedKernelManager":
        return _kernel_manager_class()
    raise AttributeError(name)
