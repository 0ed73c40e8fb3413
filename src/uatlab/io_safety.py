"""File safety for every command that reads a user's file or writes one.

The rules, applied by every writing command before it does any work:

* An input must be a regular, readable file (a directory, FIFO, device or ``-`` is named as such).
* An output path must not resolve to an input file (through links or another spelling of the path), must not
  be an existing directory (for a file) or file (for a folder), and its parent must be a writable folder.
* An output file is written to a temporary file beside it and renamed over the target only once it is
  complete (`atomic_write`, `atomic_path`): an existing file is either kept intact or replaced
  whole, never truncated.
* Two jobs never write the same output at once (`OutputLock`).
* In an output folder the user named, a run replaces a file only if uatlab wrote it there for the same kind of
  run and it is unchanged since (`OutputFolder`): the folder's record lists each such file's size and SHA-256.
  A user's file under one of the run's names is refused before any work, and again at the moment of writing.
* A work directory is deleted only if uatlab created it and can prove it: a marker file holding a random id
  that is also recorded in the directory's manifest (`write_marker`, `owns`), and its removal is not cut in
  half by Ctrl-C or SIGTERM (`interrupts_deferred`): a half-removed folder would be neither resumable nor
  provably uatlab's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from uatlab.errors import InputError, UatlabError

MARKER = ".uatlab-work"  # file name of the ownership marker inside a work directory

#: errno values that say the machine cannot hold a file (a full disk or quota, a read-only file system, no
#: permission): the environment failed, not the computation that was writing
ENVIRONMENT_ERRNOS = frozenset(
    e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EROFS, errno.EACCES, errno.EPERM) if e is not None
)


#: errno values of a full device: no space left, or the user's quota used up
DISK_FULL_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)


#: what a disk-full error line advises; a note that already gives it (with its own next step) is not given it again
DISK_FULL_ADVICE = "free some space"


def is_disk_full(exc: BaseException) -> bool:
    """True if ``exc`` is an OSError of a full disk or quota (`DISK_FULL_ERRNOS`)."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def is_environment_error(exc: BaseException) -> bool:
    """True if ``exc`` is an OSError saying a file could not be written or read for a reason of the machine's
    (`ENVIRONMENT_ERRNOS`), not of the data or the code."""
    return isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS


# ------------------------------------------------------------------------------------------------ interrupts
@contextlib.contextmanager
def interrupts_deferred(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Hold ``signals`` while a short multi-step file operation runs, then deliver the first one that came.

    Inside the block a signal is only recorded; on leaving it the previous handlers are restored and the
    first recorded signal is passed to its handler (Ctrl-C then raises KeyboardInterrupt after the operation,
    not in its middle). Python runs signal handlers in the main thread, so this holds whatever other threads
    (BLAS, torch) exist; in another thread, where handlers cannot be set, the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[tuple[int, Any]] = []
    previous: dict[int, Any] = {}
    for sig in signals:
        handler = signal.getsignal(sig)
        if handler is None:  # installed outside Python: leave it alone
            continue
        previous[sig] = handler
        signal.signal(sig, lambda signum, frame: pending.append((signum, frame)))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signum, frame = pending[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


# ------------------------------------------------------------------------------------------------ inputs
def describe_special(path: Path) -> str | None:
    """What ``path`` is if it is not a regular file ('a directory', 'a FIFO', ...), or None if it is one."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def require_path(path: object, what: str) -> None:
    """TypeError naming ``what`` unless ``path`` is a path (str or os.PathLike): a library caller's mistake is
    named at the call, not by pathlib deep inside."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what}: expected a path (str or os.PathLike), got {type(path).__name__} {path!r:.60}")


def not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file, as the end of a sentence naming it ('does not exist', 'is a broken
    symbolic link', 'is a directory, not a regular file', ...: `describe_special`), or None if it is one."""
    kind = describe_special(path)
    if kind == "missing":
        return "is a broken symbolic link" if path.is_symlink() else "does not exist"
    return None if kind is None else f"is {kind}, not a regular file"


def check_input_file(path: str | os.PathLike, what: str = "data file") -> Path:
    """``path`` as a Path if it is a readable regular file; otherwise an InputError saying what it is (a
    TypeError if ``path`` is not a path at all)."""
    require_path(path, what)
    if str(path) == "-":
        raise InputError(f"{what} '-': reading standard input is not supported; give the path of a file")
    p = Path(path)
    why = not_a_regular_file(p)
    if why is not None:
        raise InputError(f"{what} {p} {why}")
    if not os.access(p, os.R_OK):
        raise InputError(f"{what} {p} is not readable (permission denied)")
    return p


# ------------------------------------------------------------------------------------------------ outputs
def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True if both paths name the same existing file (links, ``..``, case-insensitive file systems...)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def folder_spelling(path: str | os.PathLike) -> str | None:
    """Why the text of ``path`` names a folder, as the user gave it, or None: it ends in a path separator
    (``out/``) or its last component is ``.`` or ``..`` (``out/.``, ``out/..``, ``.``). Path drops a trailing
    ``/`` and ``/.``, so a writer of ``Path("out/.")`` would make a file named ``out``; every check of a file to
    write asks this first. A Path object given by a library caller has already dropped them."""
    text = os.fsdecode(os.fspath(path))
    seps = {"/", os.sep, os.altsep} - {None}
    if text and text[-1] in seps:
        return f"{text!r} ends in {text[-1]!r}, the spelling of a folder"
    last = text
    for sep in seps:
        last = last.rsplit(sep, 1)[-1]
    if last in (".", ".."):
        return (
            f"{text!r} is the spelling of a folder"
            if last == text
            else f"{text!r} ends in {last!r}, the spelling of a folder"
        )
    return None


def _check_parent(path: Path, option: str) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    probe = parent
    while not probe.exists():  # the first existing ancestor must be a writable folder
        if probe.is_symlink():
            raise InputError(f"{option} {path}: {probe} is a broken symbolic link")
        if probe.parent == probe:
            break
        probe = probe.parent
    _check_name_length(path, probe, option)
    if probe.exists() and not probe.is_dir():
        raise InputError(f"{option} {path}: {probe} is a file, not a folder")
    why = _unwritable(probe) if probe.is_dir() else None
    if why is not None:
        raise InputError(f"{option} {path}: {why}")


def _check_name_length(path: Path, folder: Path, option: str) -> None:
    """Refuse a name too long for the longest name written beside it: the temporary file `_temp_beside` makes
    (``.NAME.<hex>.tmp``), which every write goes through, checked against the file system's limit on a name's
    bytes (``folder``: an existing ancestor; 255 where the system does not say). Without this, a name a few bytes
    under the limit passes every check and fails when the result is written, after the work."""
    name = path.name or path.resolve().name
    longest = len(_temp_beside(Path(name)).name.encode(errors="surrogateescape"))
    try:
        limit = os.pathconf(folder if folder.exists() else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if limit > 0 and longest > limit:
        size = len(name.encode(errors="surrogateescape"))
        raise InputError(
            f"{option} {path}: its name is {size} bytes; uatlab writes it through a temporary file beside it whose "
            f"name is {longest - size} bytes longer, over this file system's limit of {limit} bytes per name: choose "
            f"a name of at most {limit - (longest - size)} bytes"
        )


def _unwritable(folder: Path) -> str | None:
    """Why no file can be made in the existing ``folder`` ("folder F is not writable", "cannot write there: no
    file can be made in F (…)"), or None if one can. Permission bits and read-only mounts are what ``os.access``
    reports; it says yes to root for /proc or /sys, pseudo file systems that report no storage (no blocks) and
    refuse new files, where the run would fail only when it writes, after the work. On such a file system the
    answer is tried, with an empty hidden file removed at once; on any other nothing is touched."""
    import tempfile

    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
    try:
        if os.statvfs(folder).f_blocks > 0:
            return None
    except OSError:  # a file system that does not say (some FUSE, 9p or network mounts): tried as below
        pass
    try:
        fd, name = tempfile.mkstemp(prefix=".uatlab-probe-", dir=folder)
    except OSError as exc:
        return f"cannot write there: no file can be made in {folder} ({exc.strerror or exc})"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return None


def check_no_link_loop(path: str | os.PathLike, option: str = "--out") -> None:
    """InputError naming ``path`` if it, or a folder on its way, is a loop of symbolic links (resolving it fails):
    no file can be written or read there, and every later check that resolves the path would fail too."""
    try:
        Path(path).resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: Python < 3.13 on a loop; OSError (ELOOP) after
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a loop of symbolic links"
        raise InputError(f"{option} {path}: cannot be resolved ({why}); give another path") from None


def check_output_file(
    path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (), option: str = "--out"
) -> Path:
    """Refuse, before any work, an output file that is an input, an existing directory, or not creatable."""
    p = Path(path)
    if str(path) in ("", "-"):
        raise InputError(
            f"{option} {str(path)!r}: give the path of a file (writing to standard output is not supported)"
        )
    check_no_link_loop(p, option)
    for src in inputs:
        if src is not None and (same_file(p, src) if p.exists() else p.resolve() == Path(src).resolve()):
            raise InputError(f"{option} {p} is the input file {src}: choose another output path")
    if p.is_dir():
        raise InputError(f"{option} {p} is an existing directory; give a file path")
    if p.exists() and describe_special(p) is not None:
        raise InputError(f"{option} {p} is {describe_special(p)}, not a regular file")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{option} {p} exists and is read-only")
    _check_parent(p, option)
    return p


def check_output_dir(
    path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (), option: str = "--out"
) -> Path:
    """Refuse, before any work, an output folder that is an existing file or cannot be created or written."""
    p = Path(path)
    check_no_link_loop(p, option)
    for src in inputs:
        if src is not None and p.exists() and same_file(p, src):
            raise InputError(f"{option} {p} is the input file {src}: choose another output folder")
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {p} is an existing file, not a folder")
    why = _unwritable(p) if p.is_dir() else None
    if why is not None:
        raise InputError(f"{option} {p}: {why}")
    if not p.exists():
        _check_parent(p, option)
    return p


TEMP_TOKEN_BYTES = 4  # random bytes in a temporary file's name: ``.NAME.<2 × this many hex digits>.tmp``


def _temp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(TEMP_TOKEN_BYTES)}.tmp")


def leftover_temps(path: str | os.PathLike) -> list[Path]:
    """The temporary files `atomic_path` and `atomic_write` made beside ``path`` (``.NAME.<8 hex digits>.tmp``)
    that a run killed before its clean-up could run (SIGKILL, a power cut) left there. Called while holding the
    `OutputLock` of ``path``, each is stale: a run writing ``path`` holds that lock while its file exists."""
    import re

    p = Path(path)
    name = re.compile(rf"\.{re.escape(p.name)}\.[0-9a-f]{{{2 * TEMP_TOKEN_BYTES}}}\.tmp")  # `_temp_beside`'s names
    try:
        entries = sorted(p.parent.iterdir())  # (the parent of a bare name is ".")
    except OSError:
        return []
    return [e for e in entries if name.fullmatch(e.name) and e.is_file() and not e.is_symlink()]


def _mode_for(path: Path, tmp: Path) -> int:
    """The permission bits the replacement gets: those of the file it replaces, else those of a new file
    (0666 less the umask, read from ``tmp`` created empty: reading the umask itself would change it)."""
    with contextlib.suppress(OSError):
        st = path.stat()
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        return stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise InputError(
            f"{path} is a symbolic link: writing there would replace the link, not the file it names; left "
            "unchanged: give the path of the file itself or another path"
        )


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is fsynced and renamed over ``path``.

    The temporary exists (empty) when yielded; the file that replaces ``path`` keeps ``path``'s permission
    bits, or gets a new file's (0666 less the umask), whatever mode the writer created it with.

    On any exception the temporary file is removed and ``path`` is left as it was. Use this for libraries
    that write by file name (safetensors, torch.save, matplotlib, numpy); `atomic_write` for streams.

    A symbolic link at ``path`` is refused (InputError), before the write and again just before the rename (a
    link put there meanwhile): the rename would replace the link itself, not the file it names.
    """
    path = Path(path)
    _refuse_link(path)
    guard = _guard_for(path)  # an output folder open for this file: refuse a file that is not uatlab's
    old = guard[0].check_file(guard[1]) if guard is not None else None  # the identity `record` lists
    lock = _lock_for(path)  # an output lock held on this file with a check of what it may replace
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_beside(path)
    try:
        mode = _mode_for(path, tmp)
        yield tmp
        os.chmod(tmp, mode)  # some writers (safetensors) create their file with mode 0600
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        if lock is not None and lock.replace_check is not None:  # what is at path now (it may have come while
            lock.replace_check()  # the job ran) is checked again
        _refuse_link(path)
        if guard is not None:  # write-ahead: the record proves the new content before it replaces the old
            guard[0].record(guard[1], tmp, old)
        os.replace(tmp, path)
    except BaseException as exc:
        foreign = not isinstance(exc, (OSError, UatlabError, KeyboardInterrupt, SystemExit))
        # a writer's own error type (safetensors' SafetensorError, ...) for a failed write: its OS error number, or
        # a full disk, seen before the temporary file's space is freed
        code = _os_errno_in(exc) if foreign else None
        if foreign and code is None and _disk_full(path.parent):
            code = errno.ENOSPC
        with contextlib.suppress(OSError):
            tmp.unlink()
        if code is not None:
            raise OSError(code, os.strerror(code), str(path)) from exc
        if isinstance(exc, OSError) and exc.errno is not None and exc.filename in (None, str(tmp), tmp):
            # a writer's error names no file, or the temporary one: name the file the user asked for
            raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path)) from exc
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8", newline: str | None = None
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; rename it over ``path`` once the block completes."""
    binary = "b" in mode
    with (
        atomic_path(path) as tmp,
        open(tmp, mode, encoding=None if binary else encoding, newline=None if binary else newline) as fh,
    ):
        yield fh
        fh.flush()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a new, empty temporary folder beside ``path`` (which must not exist); on success it is renamed to
    ``path``, on any exception removed with what was written into it.

    The folder gets a new folder's permission bits (0777 less the umask), not the 0700 of `tempfile.mkdtemp`;
    write the files in it with `atomic_path` or `atomic_write`, which give them a new file's (0666 less the umask)
    and fsync each file and the folder before the rename here (which is not done a second time), and the folder
    that holds ``path`` after it.
    """
    path = Path(path)
    if path.exists() or path.is_symlink():
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = _temp_beside(path)
        try:
            tmp.mkdir(mode=0o777)  # the umask applies, as to any folder the user makes
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        if path.exists() or path.is_symlink():  # appeared while writing: never replaced
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        os.rename(tmp, path)
    except BaseException:
        with interrupts_deferred():
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see `atomic_write`)."""
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


def _os_errno_in(exc: BaseException) -> int | None:
    """The OS error number a writer's non-OSError exception reports in its message, as Rust's I/O errors do
    (``"No space left on device (os error 28)"``, ``"Os { code: 28, kind: StorageFull, ... }"``), else None."""
    import re

    m = re.search(r"\(os error (\d+)\)|Os \{ code: (\d+)", str(exc))
    return int(m.group(1) or m.group(2)) if m else None


def _disk_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < 1 << 20
    except OSError:
        return False


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ------------------------------------------------------------------------------------------------ locking
class OutputLock:
    """An exclusive, non-blocking lock on an output path (a lock file beside it; released on exit or death).

    A second job that tries to write the same output gets an InputError naming the first job's pid and
    ``hint`` (what to do instead). Also used on work directories (the lock file sits beside the folder).
    Folders the lock file needed that did not exist are created, and removed again on exit if still empty
    (a run that failed before writing leaves none behind; one that wrote its output there keeps them).

    ``replace_check`` (no argument; raises to refuse): while the lock is held, `atomic_path` on the target
    calls it once the new file is complete, just before renaming it over the target. A job checks what it may
    replace before it starts; a file another program put there while the job ran is checked here again, and
    refused, the target left as it is, rather than replaced.
    """

    def __init__(
        self,
        target: str | os.PathLike,
        hint: str = "choose another output",
        replace_check: Callable[[], None] | None = None,
    ) -> None:
        self.target = Path(target)  # as the user named it (in messages)
        self.replace_check = replace_check
        self.key = _lock_key(self.target)  # the path `atomic_path` is given, for `_lock_for`
        # beside the resolved path: "x", "./x" and "/abs/x" (or ".", "..") name one lock; "/" has no parent
        check_no_link_loop(self.target, "output")
        resolved = self.target.resolve()
        self.path = resolved.with_name(f".{resolved.name}.lock") if resolved.name else resolved / ".uatlab.lock"
        self.hint = hint
        self._fh: IO[str] | None = None
        self._made: list[Path] = []  # folders the lock file needed and this lock created, deepest first

    def __enter__(self) -> OutputLock:
        try:
            missing = self.path.parent
            while not missing.exists() and missing.parent != missing:
                self._made.append(missing)
                missing = missing.parent
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # name what the user gave, not the lock file beside it
            raise InputError(f"{self.target}: cannot write there ({exc.strerror or exc})") from None
        fh = self._locked_file()
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        if self.replace_check is not None:
            with _HELD_LOCKS_LOCK:
                _HELD_LOCKS.append(self)
        return self

    def _locked_file(self) -> IO[str]:
        """The lock file, open and flock-ed. The holder removes the file before it releases the lock (`__exit__`),
        so a lock taken on a file that is no longer the one at the path (a holder removed it between our open and
        our flock, and a third job may have made and locked a new one) is no lock: it is dropped and taken again
        on the file that is there now."""
        import fcntl

        for _ in range(1000):  # each retry means another job took and released the lock meanwhile
            try:
                fh = open(self.path, "a+")
            except OSError as exc:  # name what the user gave, not the lock file beside it
                raise InputError(f"{self.target}: cannot write there ({exc.strerror or exc})") from None
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                pid = fh.read().strip() or "?"
                fh.close()
                raise InputError(
                    f"another uatlab job (pid {pid}) is writing {self.target}; wait for it or {self.hint}"
                ) from None
            held = os.fstat(fh.fileno())
            try:
                there = os.stat(self.path)
            except FileNotFoundError:
                there = None
            if there is not None and (there.st_ino, there.st_dev) == (held.st_ino, held.st_dev):
                return fh
            fh.close()
        raise InputError(f"{self.target}: its lock file {self.path} keeps being replaced; {self.hint}")

    def __exit__(self, *exc: object) -> None:
        with _HELD_LOCKS_LOCK:
            if self in _HELD_LOCKS:
                _HELD_LOCKS.remove(self)
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self._fh.close()  # closing releases the flock
            self._fh = None
        for folder in self._made:  # a run that wrote nothing there leaves no empty folder of its own making
            try:
                folder.rmdir()  # only if empty: the output, or anything else put there, keeps it
            except OSError:
                break
        self._made = []


_HELD_LOCKS: list[OutputLock] = []  # locks held with a replace_check, which `atomic_path` calls
_HELD_LOCKS_LOCK = threading.Lock()


def _lock_key(path: Path) -> Path:
    """``path`` absolute, its folder resolved but not its last component: what `os.replace` writes at, whatever
    is there now (a file, a symbolic link, which it replaces and does not follow, or nothing). Resolving the
    last component too would follow a link placed there while a job ran to some other file, and miss the lock."""
    path = Path(os.path.abspath(path))
    try:
        return path.parent.resolve() / path.name
    except (OSError, RuntimeError):  # a loop of links in the folder's path: its own spelling then
        return path


def _lock_for(path: Path) -> OutputLock | None:
    """The held `OutputLock` with a replace_check whose target is ``path`` (any spelling of it), if any."""
    if not _HELD_LOCKS:
        return None
    key = _lock_key(path)
    with _HELD_LOCKS_LOCK:
        return next((lk for lk in reversed(_HELD_LOCKS) if lk.key == key), None)


# ------------------------------------------------------------------------------------------------ output folders
OUTPUT_RECORD = ".uatlab-outputs.json"  # in an output folder: which of its files uatlab wrote, for which run
OUTPUT_RECORD_FORMAT = "uatlab-outputs-v1"
_OPEN_FOLDERS: list[OutputFolder] = []  # folders whose writes `atomic_path` checks and records
_OPEN_FOLDERS_LOCK = threading.Lock()


def file_identity(path: str | os.PathLike) -> dict[str, Any]:
    """Size and SHA-256 of a whole file (what an output record holds for each file)."""
    ident = prefix_identity(path, None)
    return {"bytes": ident["bytes"], "sha256": ident["sha256"]}


class OutputFolder:
    """The files one kind of run (``kind``: 'train', 'reproduce', ...) writes into a folder the user named.

    The folder may hold the user's own files. A file under one of the run's ``names`` (paths relative to the
    folder; ``*`` globs allowed, e.g. ``figures/*``) is replaced only if the folder's record
    (`OUTPUT_RECORD`) lists it as written by uatlab for the same ``kind`` with the size and SHA-256 it has
    now. Anything else there is refused with one error naming the file: a user's file, a file of another
    kind of run, a uatlab file edited since, a file the run would read (``inputs``, e.g. a model to start
    from). `check` does this before any work; while the folder is open (``with``), `atomic_path` does it
    again for every file it writes under those names, and records the new file's identity before the rename
    that puts it in place (write-ahead, listing the old content too: a crash between the two leaves a file
    the record still proves). A folder a run creates starts with an empty record. Callers hold an
    `OutputLock` on the folder (one writer at a time).
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        kind: str,
        names: Iterable[str],
        inputs: Iterable[str | os.PathLike | None] = (),
        option: str = "--out",
        folders: Iterable[str] = (),
    ) -> None:
        if os.fspath(folder) == "":  # Path("") is the current folder: never what an empty name meant
            raise InputError(f"{option}: the path is empty; give a folder's name ('.' for the current folder)")
        self.folder = Path(folder)
        self.kind = kind
        self.names = tuple(names)
        self.folders = tuple(folders)  # sub-folders the run makes for files it does not list (``runs`` of trials)
        self.inputs = [Path(p) for p in inputs if p is not None]
        self.option = option
        self._lock = threading.Lock()
        self._existed = True  # set by __enter__: whether the folder was there before this run

    # ---- which files
    def _rel(self, path: Path) -> str | None:
        """``path`` relative to the folder (posix) if it is one of the run's outputs, else None."""
        import fnmatch

        try:
            rel = path.resolve().relative_to(self.folder.resolve()).as_posix()
        except ValueError:
            return None
        if rel == OUTPUT_RECORD:
            return None
        return rel if any(fnmatch.fnmatch(rel, n) for n in self.names) else None

    def existing(self) -> list[Path]:
        """The run's output paths that exist now."""
        if not self.folder.is_dir():
            return []
        found: dict[str, Path] = {}
        for name in self.names:
            for p in sorted(self.folder.glob(name)) if any(c in name for c in "*?[") else [self.folder / name]:
                if p.exists() or p.is_symlink():
                    found[p.as_posix()] = p
        return list(found.values())

    # ---- the record
    @property
    def record_path(self) -> Path:
        return self.folder / OUTPUT_RECORD

    def _load(self) -> dict[str, Any]:
        try:
            text = self.record_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InputError(f"{self.record_path}: cannot read the output record ({exc.strerror or exc})") from None
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if (
            not isinstance(doc, dict)
            or doc.get("format") != OUTPUT_RECORD_FORMAT
            or not isinstance(doc.get("files"), dict)
        ):
            raise InputError(
                f"{self.option} {self.folder}: {self.record_path} is not a uatlab output record; "
                f"choose another {self.option} folder"
            )
        return doc["files"]

    def _owner(self, rel: str, files: dict[str, Any], path: Path) -> tuple[str | None, dict[str, Any] | None]:
        """Why ``path`` (existing) may not be replaced by this run (None if it may), with its identity if it
        was hashed."""
        entry = files.get(rel)
        if not isinstance(entry, dict):
            return f"is not a file uatlab {self.kind} wrote there", None
        if entry.get("kind") != self.kind:
            return f"was written by uatlab {entry.get('kind')}, not by uatlab {self.kind}", None
        ident = file_identity(path)
        if ident not in entry.get("identities", []):
            return f"was changed after uatlab {self.kind} wrote it", ident
        return None, ident

    # ---- checks
    def _check_inputs(self, path: Path) -> None:
        for src in self.inputs:
            if same_file(path, src) if path.exists() else path.resolve() == src.resolve():
                also = "" if str(src) == str(path) else f" (as {path})"
                raise InputError(
                    f"{self.option} {self.folder}: this run reads {src} and would replace it{also}; "
                    f"copy it elsewhere or choose another {self.option} folder"
                )

    def refusal(self, rel: str) -> str | None:
        """Why this run may not replace ``folder/rel`` (``is a FIFO, where this run writes a file``, ``exists and
        is not a file uatlab KIND wrote there; this run would replace it``, ...), or None when there is no such
        file or this kind of run wrote it and it is unchanged since."""
        return self._refusal(rel)[0]

    def _refusal(self, rel: str) -> tuple[str | None, dict[str, Any] | None]:
        """`refusal`, with the identity of the file there if it was hashed (None: no file, or not hashed)."""
        path = self.folder / rel
        if not (path.exists() or path.is_symlink()):
            return None, None
        kind = describe_special(path) if not path.is_symlink() else "a symbolic link"
        if kind is not None:
            return f"is {kind}, where this run writes a file", None
        with self._lock:
            why, ident = self._owner(rel, self._load(), path)
        return (None if why is None else f"exists and {why}; this run would replace it"), ident

    def holds(self, rel: str) -> bool:
        """True if ``folder/rel`` exists and this kind of run wrote it there, unchanged since."""
        path = self.folder / rel
        return (path.exists() or path.is_symlink()) and self.refusal(rel) is None

    def check_file(self, rel: str) -> dict[str, Any] | None:
        """Refuse (InputError naming the file) replacing ``folder/rel`` unless this kind of uatlab run wrote it.
        Returns the identity of the file there as checked (None if there is none), for `record`."""
        path = self.folder / rel
        self._check_inputs(path)
        why, ident = self._refusal(rel)
        if why is not None:
            raise InputError(
                f"{self.option} {self.folder}: {path} {why}: move it away or choose another {self.option} folder"
            )
        return ident

    def remove(self, rel: str) -> bool:
        """Delete ``folder/rel`` if this kind of run wrote it and it is unchanged since, then drop it from the
        record; False if there is no such file. Any other file there is never deleted (InputError naming it)."""
        path = self.folder / rel
        why = self.refusal(rel)
        if why is not None:
            raise InputError(f"{path} {why.split(';')[0]}: it is kept; move it away or choose another folder")
        if not (path.exists() or path.is_symlink()):
            return False
        with self._lock:
            path.unlink()  # first: a crash before the record is rewritten leaves an entry for a missing file
            files = {k: v for k, v in self._load().items() if k != rel}
            doc = {"format": OUTPUT_RECORD_FORMAT, "files": files}
            write_text_atomic(self.record_path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        return True

    def check(self) -> OutputFolder:
        """Before any work: every output the run would replace is uatlab's for this kind of run, none is an input,
        and every sub-folder its files go into (``trials`` of ``trials/*.json``, and ``folders``) is a folder or
        absent."""
        for parts in (
            *(PurePosixPath(n).parent.parts for n in self.names),
            *(PurePosixPath(f).parts for f in self.folders),
        ):
            self._check_subfolders(parts)
        for name in self.names:
            if not any(c in name for c in "*?["):
                self._check_inputs(self.folder / name)
        if self.folder.is_dir() and self.existing():
            self._load()  # a damaged record is named once, not per file
        for path in self.existing():
            self.check_file(path.relative_to(self.folder).as_posix())
        return self

    def _check_subfolders(self, parts: tuple[str, ...]) -> None:
        """Refuse (InputError naming it) a file, FIFO, ... where the run makes the sub-folder ``parts`` (relative
        to the folder) for its files: found now, not after the work when the first file is written there."""
        sub = self.folder
        for part in parts:
            if any(c in part for c in "*?["):
                return
            sub = sub / part
            if (sub.exists() or sub.is_symlink()) and not sub.is_dir():
                kind = describe_special(sub)  # a regular file: None; a dangling link: "missing"
                what = {None: "is a file", "missing": "is a broken symbolic link"}.get(kind, f"is {kind}")
                raise InputError(
                    f"{self.option} {self.folder}: {sub} {what}, where this run writes a folder of its files: "
                    f"move it away or choose another {self.option} folder"
                )

    def record(self, rel: str, new: Path, old: dict[str, Any] | None) -> None:
        """Record that the content of ``new`` (about to be renamed to ``folder/rel``) is this run's, with the old
        content of ``folder/rel``: ``old``, its identity as `check_file` returned it when the write began (None:
        there was no file)."""
        with self._lock:
            files = dict(self._load()) if self.record_path.exists() else {}
            ids = [old] if old is not None else []
            ids.append(file_identity(new))
            files[rel] = {"kind": self.kind, "identities": ids}
            doc = {"format": OUTPUT_RECORD_FORMAT, "files": files}
            write_text_atomic(self.record_path, json.dumps(doc, indent=1, sort_keys=True) + "\n")

    # ---- open: writes through atomic_path are checked and recorded
    def __enter__(self) -> OutputFolder:
        self.check()
        self._existed = self.folder.exists() or self.folder.is_symlink()
        with _OPEN_FOLDERS_LOCK:
            _OPEN_FOLDERS.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        with _OPEN_FOLDERS_LOCK:
            if self in _OPEN_FOLDERS:
                _OPEN_FOLDERS.remove(self)
        if not self._existed:  # a run that wrote nothing leaves no empty folder of its own making (as `OutputLock`)
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # only if empty: anything put there keeps it


def _guard_for(path: Path) -> tuple[OutputFolder, str] | None:
    """The innermost open output folder that ``path`` is one of the outputs of, with its relative name."""
    if not _OPEN_FOLDERS:
        return None
    with _OPEN_FOLDERS_LOCK:
        folders = list(_OPEN_FOLDERS)
    best: tuple[OutputFolder, str] | None = None
    for f in folders:
        rel = f._rel(path)
        if rel is not None and (best is None or len(rel) < len(best[1])):
            best = (f, rel)
    return best


# ------------------------------------------------------------------------------------------------ work dirs
def new_work_id() -> str:
    return secrets.token_hex(16)


def write_marker(folder: str | os.PathLike, work_id: str, created: bool) -> None:
    """Record in ``folder`` that uatlab made it (``created``) or only its contents, under ``work_id``."""
    write_text_atomic(Path(folder) / MARKER, json.dumps({"uatlab_work_id": work_id, "created_folder": created}))


def read_marker(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The marker of a uatlab work directory, or None if there is none (or it is not ours)."""
    try:
        m = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and isinstance(m.get("uatlab_work_id"), str) else None


def owns(folder: str | os.PathLike, work_id: str | None) -> bool:
    """True only if ``folder`` holds a marker with ``work_id`` (the id recorded in its manifest)."""
    m = read_marker(folder)
    return m is not None and work_id is not None and m["uatlab_work_id"] == work_id


# ------------------------------------------------------------------------------------------------ identity
def prefix_identity(path: str | os.PathLike, lines: int | None) -> dict[str, Any]:
    """Size and SHA-256 of the first ``lines`` lines of a file (all of it if None): what a reader consumed (lines
    end as the data readers end them, `uatlab.data.text_file.raw_lines`: at \\n, \\r\\n or a lone \\r)."""
    from uatlab.data.text_file import raw_lines

    h = hashlib.sha256()
    size = 0
    count = 0
    with open(path, "rb") as fh:
        if lines is None:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
                size += len(block)
                count += block.count(b"\n")
        else:
            for raw in raw_lines(fh):
                if count >= lines:
                    break
                h.update(raw)
                size += len(raw)
                count += 1
    return {"lines": lines, "bytes": size, "sha256": h.hexdigest()}


def save_figure(fig: Any, path: str | os.PathLike, **kwargs: Any) -> Path:
    """``fig.savefig`` through `atomic_path` (the format is taken from ``path``'s suffix)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kwargs)
    return path
