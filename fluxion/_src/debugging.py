"""`fluxion.debug.print` and `fluxion.debug.breakpoint`, both built on debug callbacks."""
from __future__ import annotations

import builtins
import cmd
import linecache
import logging
import pprint
import string
import sys

from fluxion._src import core, source_info
from fluxion._src.callbacks import debug_callback


def _check_format(fmt: str, args, kwargs) -> None:
    """Raise now (at trace time) for format fields the arguments cannot fill (the classes
    `str.format` raises: IndexError for positional fields, KeyError for named ones)."""
    auto = 0
    for _, field, _, _ in string.Formatter().parse(fmt):
        if field is None:
            continue
        head = field.split(".")[0].split("[")[0]
        if head == "":
            if auto >= len(args):
                raise IndexError(f"debug.print format string {fmt!r} has more positional "
                                 f"fields than the {len(args)} positional arguments given")
            auto += 1
        elif head.isdigit():
            if int(head) >= len(args):
                raise IndexError(f"debug.print format string {fmt!r} refers to positional "
                                 f"argument {head}, but only {len(args)} were given")
        elif head not in kwargs:
            raise KeyError(f"debug.print format string {fmt!r} uses the field {head!r}, which "
                           f"is not among the keyword arguments {sorted(kwargs)}")


class _UnusedArgumentsCheck(string.Formatter):
    """JAX's check that every argument of a debug.print is used by its format (formats
    nothing: the values are tracers at trace time)."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused_args = [a for i, a in enumerate(args) if i not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `debug.print`: {unused_args}")
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_kwargs:
            raise ValueError(f"Unused keyword arguments to `debug.print`: {unused_kwargs}. You "
                             "may be passing an f-string (i.e, `f\"{x}\"`) into `debug.print` "
                             "and instead should pass in a regular string.")


def _print_formatted(fmt: str, *args, **kwargs) -> None:
    builtins.print(fmt.format(*args, **kwargs))


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Print from traced code, with `str.format` fields filled with the runtime values.

    Under `vmap` it prints once per batch element; with `ordered=True` prints keep program
    order."""
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print takes a format string first, got {type(fmt).__name__}")
    _check_format(fmt, args, kwargs)
    _UnusedArgumentsCheck().format(fmt, *args, **kwargs)
    debug_callback(_Formatter(fmt), *args, ordered=ordered, **kwargs)


def log(fmt: str, *args, ordered: bool = False, **kwargs) -> None:
    """`debug.print` through the logging module: an INFO record of the logger
    "fluxion._src.debugging", located at the user's line that called `log`."""
    if not isinstance(fmt, str):
        raise TypeError(f"debug.log takes a format string first, got {type(fmt).__name__}")
    _check_format(fmt, args, kwargs)
    _UnusedArgumentsCheck().format(fmt, *args, **kwargs)
    where = source_info.current()
    location = ("(unknown file)", 0) if where is None else (where.file, where.line)
    debug_callback(_Formatter(fmt, location), *args, ordered=ordered, **kwargs)


_logger = logging.getLogger(__name__)


class _Formatter:
    """The callback of one `debug.print` or `debug.log` (named, so errors and jaxprs show what
    it is); `location` (file, line) makes it log rather than print."""

    __slots__ = ("fmt", "location", "__name__")

    def __init__(self, fmt, location=None):
        self.fmt = fmt
        self.location = location
        self.__name__ = "debug_print"

    def __call__(self, *args, **kwargs):
        if self.location is None:
            _print_formatted(self.fmt, *args, **kwargs)
        elif _logger.isEnabledFor(logging.INFO):
            record = _logger.makeRecord(_logger.name, logging.INFO, *self.location,
                                        self.fmt.format(*args, **kwargs), (), None)
            _logger.handle(record)


# ---------------------------------------------------------------------------------------------
# breakpoint

class _Debugger(cmd.Cmd):
    """A small pdb-like command loop over the values a breakpoint captured, with JAX's
    prompt and commands (`jdb`)."""

    prompt = "(jdb) "
    intro = "Entering jdb:"

    def __init__(self, frame_info, values, stdin=None, stdout=None):
        super().__init__(stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)
        self.use_rawinput = stdin is None and sys.stdin is sys.__stdin__
        self.filename, self.lineno, self.function, self.globals = frame_info
        self.namespace = dict(values)

    def _eval(self, expr):
        return eval(expr, dict(self.globals), self.namespace)  # noqa: S307 - a debugger

    def default(self, line):
        """An expression prints its repr, as in JAX's jdb; a statement is executed."""
        try:
            try:
                code = compile(line, "<debugger>", "eval")
            except SyntaxError:
                exec(compile(line, "<debugger>", "exec"), dict(self.globals), self.namespace)  # noqa: S102
            else:
                self.stdout.write(repr(eval(code, dict(self.globals), self.namespace)) + "\n")  # noqa: S307
        except Exception as e:  # noqa: BLE001
            self.stdout.write(f"*** {type(e).__name__}: {e}\n")

    def do_p(self, arg):
        try:
            self.stdout.write(repr(self._eval(arg)) + "\n")
        except Exception as e:  # noqa: BLE001
            self.stdout.write(f"*** {type(e).__name__}: {e}\n")

    def do_pp(self, arg):
        try:
            self.stdout.write(pprint.pformat(self._eval(arg)) + "\n")
        except Exception as e:  # noqa: BLE001
            self.stdout.write(f"*** {type(e).__name__}: {e}\n")

    def do_l(self, arg):
        for n in range(max(1, self.lineno - 5), self.lineno + 6):
            line = linecache.getline(self.filename, n)
            if line:
                mark = "->" if n == self.lineno else "  "
                self.stdout.write(f"{n:4d} {mark} {line}")

    do_list = do_l

    def do_w(self, arg):
        self.stdout.write(f"> {self.filename}({self.lineno}){self.function}()\n")

    do_where = do_bt = do_w

    def do_c(self, arg):
        return True

    do_continue = do_cont = do_c

    def do_q(self, arg):
        """Quit: the program is given an exit command (SystemExit), as in JAX."""
        sys.exit(0)

    do_quit = do_exit = do_EOF = do_q

    def emptyline(self):
        return False


def _capture_frame(depth: int):
    frame = sys._getframe(depth)
    while frame is not None and core._is_internal_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def breakpoint(*, backend=None, filter_frames: bool = True, num_frames=None,  # noqa: A001
               ordered: bool = False, token=None, stdin=None, stdout=None):
    """Stop and open a debugger on the host with the caller's local values.

    Eagerly (and under `disable_jit`) the values are the arrays themselves; inside `jit`, the
    traced locals are passed out through a debug callback, and the debugger opens when the
    compiled program reaches this point. `p expr`, `pp expr`, `l`, `w` and `c` work as in
    pdb; `q` (and the end of input) exits the program, as in JAX; other lines are evaluated
    (their repr printed) or executed as Python."""
    frame = _capture_frame(2)
    names, arrays, others = [], [], {}
    for name, value in frame.f_locals.items():
        if isinstance(value, core.Tracer) or core.valid_jaxtype(value) and not isinstance(
                value, (bool, int, float, complex)):
            names.append(name)
            arrays.append(value)
        else:
            others[name] = value
    info = (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, frame.f_globals)

    def open_debugger(*values):  # the values come as Arrays, as JAX's jdb shows them
        namespace = dict(others)
        namespace.update(zip(names, values))
        _Debugger(info, namespace, stdin=stdin, stdout=stdout).cmdloop()

    open_debugger.__name__ = "breakpoint"
    debug_callback(open_debugger, *arrays, ordered=ordered)
    return token
