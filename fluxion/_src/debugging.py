"""`fluxion.debug.print` and `fluxion.debug.breakpoint`, both built on debug callbacks."""
from __future__ import annotations

import builtins
import cmd
import inspect
import logging
import pprint
import string
import sys
import traceback

from fluxion._src import core, source_info, tree_util
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
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused_args}")
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_kwargs:
            raise ValueError(f"Unused keyword arguments to `jax.debug.print`: {unused_kwargs}. You "
                             "may be passing an f-string (i.e, `f\"{x}\"`) into `jax.debug.print` "
                             "and instead should pass in a regular string.")


def _print_formatted(fmt: str, *args, **kwargs) -> None:
    # One write per line: the devices of a shard_map or pmap call back from their own threads,
    # and print() writes the text and the newline separately.
    sys.stdout.write(fmt.format(*args, **kwargs) + "\n")


def print(fmt: str | None = None, *args, ordered: bool = False,  # noqa: A001
          partitioned: bool = False, skip_format_check: bool = False, **kwargs):
    """Print from traced code, with `str.format` fields filled with the runtime values.

    Under `vmap` it prints once per batch element; with `ordered=True` prints keep program
    order. `skip_format_check` allows arguments the format does not use; `partitioned` is
    accepted as in JAX. Without `fmt` (JAX's two-call form, `debug.print(ordered=True)(fmt,
    x)`) it returns the function that prints with these options."""
    def call(fmt, *args, **kwargs):
        _checked("print", fmt, args, kwargs, skip_format_check)
        debug_callback(_Formatter(fmt), *args, ordered=ordered, **kwargs)
    return _one_or_two_calls("debug_print", call, fmt, args, kwargs)


def log(fmt: str | None = None, *args, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs):
    """`debug.print` through the logging module: an INFO record of the logger
    "fluxion._src.debugging", located at the user's line that called `log`."""
    def call(fmt, *args, **kwargs):
        _checked("log", fmt, args, kwargs, skip_format_check)
        where = source_info.current()
        location = ("(unknown file)", 0) if where is None else (where.file, where.line)
        debug_callback(_Formatter(fmt, location), *args, ordered=ordered, **kwargs)
    return _one_or_two_calls("debug_print", call, fmt, args, kwargs)


def _checked(name: str, fmt, args, kwargs, skip_format_check: bool) -> None:
    if not isinstance(fmt, str):
        raise TypeError(f"debug.{name} takes a format string first, got {type(fmt).__name__}")
    if not skip_format_check:
        _check_format(fmt, args, kwargs)
        _UnusedArgumentsCheck().format(fmt, *args, **kwargs)


def _one_or_two_calls(name: str, call, fmt, args, kwargs):
    if fmt is not None:
        return call(fmt, *args, **kwargs)
    if args or kwargs:
        raise TypeError(f"{name} received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return call


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

class _Frame:
    """One user stack frame a breakpoint shows: its file, line, locals and source."""

    def __init__(self, frame):
        self.filename = frame.f_code.co_filename
        self.lineno = frame.f_lineno
        self.function = frame.f_code.co_name
        self.globals = frame.f_globals
        self.locals = dict(frame.f_locals)
        self.source, self.offset = _source_around(frame)


def _source_around(frame):
    """The source of the frame's code and the index of its current line in it (as JAX's
    debugger finds them; ([], None) where the source cannot be read)."""
    try:
        _, start = inspect.getsourcelines(frame)
        source = inspect.getsource(frame).split("\n")
    except (OSError, TypeError):
        return [], None
    offset = frame.f_lineno - max(start, 1)
    if offset >= len(source):
        return [], None
    return source, offset


class _Debugger(cmd.Cmd):
    """JAX's `jdb` command loop over the frames a breakpoint captured (innermost first)."""

    prompt = "(jdb) "
    intro = "Entering jdb:"

    def __init__(self, frames, stdin=None, stdout=None):
        super().__init__(stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)
        self.use_rawinput = stdin is None and sys.stdin is sys.__stdin__
        self.frames = frames
        self.frame_index = 0

    def _frame(self) -> _Frame:
        return self.frames[self.frame_index]

    def _env(self) -> dict:
        frame = self._frame()
        return {**frame.globals, **frame.locals}

    def _eval(self, expr):
        return eval(expr, {}, self._env())  # noqa: S307 - a debugger

    def _print(self, text: str) -> None:
        self.stdout.write(text + "\n")

    def _error_message(self) -> None:
        self._print("*** " + traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip())

    def default(self, line):
        """An expression prints its repr, as in JAX's jdb; a statement is executed."""
        try:
            try:
                code = compile(line, "<debugger>", "eval")
            except SyntaxError:
                frame = self._frame()
                exec(compile(line, "<debugger>", "exec"), dict(frame.globals), frame.locals)  # noqa: S102
            else:
                self._print(repr(eval(code, {}, self._env())))  # noqa: S307
        except Exception:  # noqa: BLE001
            self._error_message()

    def do_p(self, arg):
        """p expression: evaluate and print its repr."""
        try:
            self._print(repr(self._eval(arg)))
        except Exception:  # noqa: BLE001
            self._error_message()

    def do_pp(self, arg):
        """pp expression: evaluate and pretty-print it."""
        try:
            self._print(pprint.pformat(self._eval(arg)))
        except Exception:  # noqa: BLE001
            self._error_message()

    def _print_context(self, num_lines: int = 2) -> None:
        frame = self._frame()
        lines = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            for i, line in enumerate(frame.source):
                if frame.offset - 1 - num_lines <= i <= frame.offset + num_lines:
                    lines.append(f"->  {line}" if i == frame.offset else f"    {line}")
        self._print("\n".join(lines))

    def do_up(self, arg):
        """u(p): move to the calling frame."""
        if self.frame_index == len(self.frames) - 1:
            self._print("At topmost frame.")
        else:
            self.frame_index += 1
        self._print_context()

    do_u = do_up

    def do_down(self, arg):
        """d(own): move to the called frame."""
        if self.frame_index == 0:
            self._print("At bottommost frame.")
        else:
            self.frame_index -= 1
        self._print_context()

    do_d = do_down

    def do_list(self, arg):
        """l(ist): the source around the current line."""
        self._print_context(num_lines=5)

    do_l = do_list

    def do_where(self, arg):
        """w(here): the stack, the innermost frame last."""
        lines = ["Traceback:"]
        for frame in self.frames[::-1]:
            lines.append(f'  File "{frame.filename}", line {frame.lineno}')
            lines.append("    <no source>" if frame.offset is None
                         else f"    {frame.source[frame.offset].strip()}")
        self._print("\n".join(lines))

    do_w = do_bt = do_where

    def do_continue(self, arg):
        """c(ont(inue)): resume the program."""
        return True

    do_c = do_cont = do_continue

    def do_quit(self, arg):
        """q(uit): the program is given an exit command (SystemExit), as in JAX."""
        sys.exit(0)

    do_q = do_exit = do_EOF = do_quit

    def emptyline(self):
        return False


def _user_frames(depth: int, num_frames):
    """The stack frames outside fluxion from `depth` up, innermost first."""
    frames = []
    frame = sys._getframe(depth)
    while frame is not None and (num_frames is None or len(frames) < num_frames):
        if not core._is_internal_file(frame.f_code.co_filename):
            frames.append(_Frame(frame))
        frame = frame.f_back
    return frames


def _traced_leaves(frames):
    """The traced values among the frames' locals (in pytrees too), which the callback passes
    out (concrete ones stay where they are, as in JAX); where they sit, to put the callback's
    values back."""
    places, values = [], []
    for i, frame in enumerate(frames):
        for name, value in frame.locals.items():
            try:
                leaves, tree = tree_util.tree_flatten(value)
            except Exception:  # noqa: BLE001 - a local that cannot be flattened stays as is
                continue
            picked = [j for j, leaf in enumerate(leaves) if isinstance(leaf, core.Tracer)]
            if picked:
                places.append((i, name, leaves, tree, picked))
                values.extend(leaves[j] for j in picked)
    return places, values


def breakpoint(*, backend=None, filter_frames: bool = True, num_frames=None,  # noqa: A001
               ordered: bool = False, token=None, stdin=None, stdout=None):
    """Stop and open JAX's `jdb` debugger on the host with the caller's frames.

    Eagerly (and under `disable_jit`) the values are the arrays themselves; inside `jit`, the
    traced values among the frames' locals are passed out through a debug callback, and the
    debugger opens when the compiled program reaches this point. `p expr`, `pp expr`, `u`,
    `d`, `l`, `w` and `c` work as in JAX's; `q` (and the end of input) exits the program, as
    in JAX; other lines are evaluated (their repr printed) or executed as Python."""
    frames = _user_frames(2, num_frames)
    places, arrays = _traced_leaves(frames)

    def open_debugger(*values):  # the values come as Arrays, as JAX's jdb shows them
        values = iter(values)
        for i, name, leaves, tree, picked in places:
            leaves = list(leaves)
            for j in picked:
                leaves[j] = next(values)
            frames[i].locals[name] = tree.unflatten(leaves)
        _Debugger(frames, stdin=stdin, stdout=stdout).cmdloop()

    open_debugger.__name__ = "breakpoint"
    debug_callback(open_debugger, *arrays, ordered=ordered)
    return token
