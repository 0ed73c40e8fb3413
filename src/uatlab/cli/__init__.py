"""uatlab's command line: ``uatlab --help`` lists every command in one line each.

Command modules register on the shared `uatlab.cli.app.app`; they are imported here.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import importlib
import os
import signal
import sys
from collections.abc import Iterator

INTERRUPTED = "interrupted (partial results, if any, were kept)"


def _run_as_command() -> bool:
    """True when this process is the ``uatlab`` script or ``python -m uatlab`` (not a library or test import)."""
    top = sys.modules.get("__main__")
    spec = getattr(top, "__spec__", None)
    script = os.path.basename(getattr(top, "__file__", None) or "")
    return getattr(spec, "name", None) == "uatlab.__main__" or script.split(".")[0] == "uatlab"


def _exit_interrupted(_signum: int, _frame: object) -> None:
    os.write(2, f"{INTERRUPTED}\n".encode())
    os._exit(130)


# Ctrl-C before main() starts (while the script's imports run) exits with the one line instead of a traceback:
# nothing has been computed yet, so nothing is lost. main() replaces this handler with its own.
if _run_as_command():
    try:
        signal.signal(signal.SIGINT, _exit_interrupted)
    except ValueError:  # not the main thread
        pass

# One module per area; each adds its commands to ``app`` on import.
COMMAND_MODULES: list[str] = [
    "uatlab.cli.reproduce",
    "uatlab.cli.experiment",
    "uatlab.cli.train",
    "uatlab.cli.theory",
    "uatlab.cli.paper_b",
    "uatlab.cli.compile",
    "uatlab.cli.approx",
    "uatlab.cli.boltzmann",
    "uatlab.cli.rank_ablation",
    "uatlab.cli.export",
    "uatlab.cli.predict",
]


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name)


def one_line(text: str) -> str:
    """A message as one line (an error is one ``error: ...`` line, whatever the terminal width)."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _error(message: str) -> int:
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.stderr.flush()
    return 2


def _usage_error(exc) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None and ctx.command_path else ""
    return where + exc.format_message() + (f" (see '{ctx.command_path} --help')" if ctx is not None else "")


def _os_error(exc: OSError) -> str:
    name = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    from uatlab.io_safety import DISK_FULL_ADVICE, is_disk_full  # no numpy or torch: the error path stays light

    notes = "; ".join(getattr(exc, "__notes__", ()))  # what the command kept and how to go on (add_note)
    if is_disk_full(exc):
        what = "no space left on device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
        where = f" writing {name}" if name else ""
        if DISK_FULL_ADVICE not in notes:  # every disk-full line ends with what to do about it
            notes = "; ".join(filter(None, (notes, f"{DISK_FULL_ADVICE} and run again")))
        return f"{what}{where} (nothing was replaced; {notes})"
    line = f"{name}: {reason}" if name else reason
    return f"{line} ({notes})" if notes else line


def _defer_interrupts_during_torch_import() -> None:
    """Ctrl-C while torch initialises its C++ extension aborts the process ("terminate called after throwing
    ... KeyboardInterrupt"); an interrupt (SIGINT or SIGTERM) that arrives while a torch module is being
    imported is held back and raised (as KeyboardInterrupt) as soon as that import is done."""
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return
    marker = f"{os.sep}torch{os.sep}"

    def importing_torch(frame) -> bool:
        while frame is not None:
            if frame.f_code.co_name == "<module>" and marker in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        return False

    def on_interrupt(_signum, frame) -> None:
        if importing_torch(frame):
            signal.setitimer(signal.ITIMER_REAL, 0.05)  # look again shortly
            return
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, on_interrupt)
    signal.signal(signal.SIGINT, on_interrupt)
    # SIGTERM (kill, a scheduler's stop) ends the command as Ctrl-C does: temporary files removed, finished work
    # kept, exit 130 with the one line; its default action would end the process with no clean-up at all
    signal.signal(signal.SIGTERM, on_interrupt)


STDOUT_ERRORS = "uatlab-escape"  # the codec error handler stdout writes with during a command


def _escape_unencodable(exc: UnicodeError) -> tuple[str | bytes, int]:
    """Codec error handler, Python's two in turn: bytes that came in undecodable (lone surrogates U+DC80-U+DCFF,
    what ``surrogateescape`` reads from a file name or argument) go out as those bytes again; any other run of
    characters the encoding cannot write goes out escaped (``backslashreplace``: ``\\xfc``, ``\\u6771``)."""
    try:
        return codecs.lookup_error("surrogateescape")(exc)
    except UnicodeError:  # not only such surrogates
        return codecs.backslashreplace_errors(exc)


codecs.register_error(STDOUT_ERRORS, _escape_unencodable)


@contextlib.contextmanager
def _stdout_escapes_what_it_cannot_encode() -> Iterator[None]:
    """For the command's duration: a word stdout's encoding cannot write (``PYTHONIOENCODING=ascii``, a cp1252
    console, a C locale) is written escaped (``Z\\xfcrich``, as stderr writes it) instead of ending the command
    in a UnicodeEncodeError after its work was done (a model saved, labels half printed). The stream's own error
    mode is restored afterwards (a program that calls `main` keeps its stdout as it was)."""
    stream = sys.stdout
    reconfigure = getattr(stream, "reconfigure", None)  # io.TextIOWrapper's; a StringIO or None has none
    before = getattr(stream, "errors", None)
    changed = False
    if callable(reconfigure) and before in ("strict", "surrogateescape"):
        try:
            reconfigure(errors=STDOUT_ERRORS)
            changed = True
        except (ValueError, OSError):  # a closed or detached stream: left as it is
            pass
    try:
        yield
    finally:
        if changed:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors=before)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uatlab`` script: exit 0 on success, 2 with one ``error:`` line on a user error,
    130 on Ctrl-C (partial results kept)."""
    try:
        with _stdout_escapes_what_it_cannot_encode():
            return _main(argv)
    finally:
        if argv is None:  # the real command line: the process exits next
            _quiet_after_main()


def _main(argv: list[str] | None) -> int:
    try:
        if argv is None:  # the real command line (not a test calling main in-process)
            _defer_interrupts_during_torch_import()
        from uatlab.cli.app import app
        from uatlab.memory_guard import set_memory_limit

        set_memory_limit(None)  # each invocation starts from the default limit (or UATLAB_MAX_MEMORY)
        _interrupted_line()  # and says only what it kept itself when interrupted
        _load_commands()
        code = app(args=argv, prog_name="uatlab", standalone_mode=False)
        if code == 130:  # typer turns Ctrl-C inside a command into a silent exit code 130
            sys.stderr.write(f"{_interrupted_line()}\n")
    except KeyboardInterrupt:
        sys.stderr.write(f"{_interrupted_line()}\n")
        return 130
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - sorted below; anything unexpected keeps its traceback
        if "uatlab.errors" not in sys.modules and not _raised_while_interrupted(exc):
            raise
        from uatlab.errors import UatlabError

        # click's exception classes (typer may vendor its own copy of click): matched by name
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        if "Abort" in kinds or _raised_while_interrupted(exc):
            sys.stderr.write(f"{_interrupted_line()}\n")
            return 130
        if isinstance(exc, UatlabError):  # with what the command kept, if it said (``add_note``)
            return _error("; ".join([str(exc), *getattr(exc, "__notes__", ())]))
        if "NoArgsIsHelpError" in kinds:  # ``uatlab`` alone (or a group alone) prints its help
            sys.stdout.write(exc.format_message() + "\n")
            return 2
        if "UsageError" in kinds:
            return _error(_usage_error(exc))
        if "ClickException" in kinds:
            return _error(exc.format_message())
        if isinstance(exc, OSError):
            return _error(_os_error(exc))
        if isinstance(exc, MemoryError):
            return _error("out of memory: the request is too large for this machine; use smaller sizes")
        raise
    return code if isinstance(code, int) else 0


def _interrupted_line() -> str:
    """The line an interrupted command ends with: what it saved or kept, if it said (`say_on_interrupt`)."""
    app = sys.modules.get("uatlab.cli.app")
    return app.interrupt_line(INTERRUPTED) if app is not None else INTERRUPTED


def _raised_while_interrupted(exc: BaseException) -> bool:
    """True when ``exc`` was raised while a KeyboardInterrupt was being handled (Ctrl-C landed inside a library's
    own clean-up, e.g. a zip file closed with an entry still open): the interrupt is what happened."""
    seen: set[int] = set()
    cause = exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


def _quiet_after_main() -> None:
    """The command has ended and said so: a held-back interrupt's timer is disarmed and a
    late Ctrl-C is ignored, so nothing raises KeyboardInterrupt between ``main()`` returning and the process
    exiting (an uncaught one there would end the process by SIGINT, exit status -2, after the one line was already
    printed). A SIGTERM in that window (the interpreter's own shutdown, about a quarter of a second) is ignored
    too: the command's outputs are complete and said, and the default action would turn a finished run into
    status 143 with no line. (Ignoring is the one setting that survives the interpreter's finalization, which
    resets Python-level handlers to the default; a shutdown that hung would need SIGKILL.)"""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _forget_handled_interrupt()


def _forget_handled_interrupt() -> None:
    """CPython remembers a KeyboardInterrupt that escaped code run through ``PyRun_*`` (as extension modules do
    while they are imported) and, at exit, ends the process by SIGINT (status -2) even when that interrupt was
    caught afterwards and the command exited 130 with its one line. Every ``PyRun_*`` call clears that memory
    first, so running an empty statement through it forgets the interrupt main() has already handled."""
    if sys.implementation.name != "cpython":
        return
    try:
        import ctypes

        ctypes.pythonapi.PyRun_SimpleString(b"pass")
    except (ImportError, AttributeError, OSError):  # no ctypes, or no Python C API in this build
        pass


if __name__ == "__main__":
    sys.exit(main())
