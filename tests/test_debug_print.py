"""debug.print (captured stdout) and debug.breakpoint (scripted debugger input)."""
import io

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax


def test_format_fields_eager_and_jit(capsys):
    def f(x, y):
        jax.debug.print("x={x} y={} s={s:.3f}", y, x=x, s=x.sum())
        return x

    f(jnp.arange(3.0), jnp.int32(7))
    jax.jit(f)(jnp.arange(3.0), jnp.int32(7))
    out = capsys.readouterr().out.splitlines()
    assert out == ["x=[0. 1. 2.] y=7 s=3.000"] * 2


def test_print_per_batch_element_under_vmap(capsys):
    def f(x):
        jax.debug.print("v={}", x)
        return x * 2

    jax.vmap(f)(jnp.arange(3.0))
    assert capsys.readouterr().out.splitlines() == ["v=0.0", "v=1.0", "v=2.0"]
    jax.jit(jax.vmap(jax.vmap(f)))(jnp.arange(4.0).reshape(2, 2))
    assert capsys.readouterr().out.splitlines() == ["v=0.0", "v=1.0", "v=2.0", "v=3.0"]


def test_ordered_prints_keep_program_order(capsys):
    def f(x):
        for i in range(6):
            jax.debug.print("step {i} {x}", i=i, x=x + i, ordered=True)

        def body(c, _):
            jax.debug.print("scan {}", c, ordered=True)
            return c + 1, None

        c, _ = lax.scan(body, 0, None, length=3)
        lax.cond(c > 1, lambda: jax.debug.print("cond true", ordered=True),
                 lambda: jax.debug.print("cond false", ordered=True))

        def wbody(c):
            jax.debug.print("while {}", c, ordered=True)
            return c + 1

        lax.while_loop(lambda c: c < 2, wbody, 0)
        jax.jit(lambda: jax.debug.print("nested jit", ordered=True))()
        jax.debug.print("end", ordered=True)
        return x

    jax.jit(f)(jnp.float32(0))
    want = ([f"step {i} {float(i)}" for i in range(6)] + ["scan 0", "scan 1", "scan 2",
            "cond true", "while 0", "while 1", "nested jit", "end"])
    assert capsys.readouterr().out.splitlines() == want


def test_print_under_grad_and_in_loops(capsys):
    def f(x):
        jax.debug.print("x={}", x)
        return x ** 2

    assert float(jax.grad(f)(3.0)) == 6.0
    assert capsys.readouterr().out == "x=3.0\n"

    def g(xs):
        return lax.fori_loop(0, 3, lambda i, c: (jax.debug.print("i={}", i), c + xs[i])[1], 0.0)

    jax.jit(g)(jnp.arange(3.0))
    assert capsys.readouterr().out.splitlines() == ["i=0", "i=1", "i=2"]


@pytest.mark.parametrize("library", ["jax", "fluxion"])
def test_prints_in_a_checkpoint_run_again_with_the_recomputation(library, capsys):
    # As JAX: the rematerialized forward pass in the backward pass prints again; jvp and
    # linearize (no backward pass) print once.
    import importlib
    m = importlib.import_module(library)

    def h(x):
        m.debug.print("x={}", x)
        y = m.numpy.sin(x)
        m.debug.print("y={y:.3f}", y=y, ordered=True)
        return m.numpy.cos(y)

    f = m.checkpoint(h)
    TWICE = ["x=1.0", "x=1.0", "y=0.841", "y=0.841"]  # (an unordered print may come first)
    for run in (m.grad(f), m.jit(m.grad(f)), m.jit(m.value_and_grad(f))):
        run(1.0)
        assert sorted(capsys.readouterr().out.splitlines()) == TWICE
    m.jvp(f, (1.0,), (1.0,))
    m.linearize(f, 1.0)
    assert sorted(capsys.readouterr().out.splitlines()) == TWICE


def test_print_format_errors_at_trace_time():
    with pytest.raises(KeyError, match="y"):
        jax.jit(lambda x: jax.debug.print("{y}", x=x))(1.0)
    with pytest.raises(IndexError, match="positional"):
        jax.debug.print("{} {}", 1.0)
    with pytest.raises(TypeError):
        jax.debug.print(3.0)


def test_print_every_call(capsys):
    f = jax.jit(lambda x: (jax.debug.print("call {}", x), x + 1)[1])
    for i in range(3):
        f(jnp.float32(i))
    assert capsys.readouterr().out.splitlines() == ["call 0.0", "call 1.0", "call 2.0"]


def _run_breakpoint(fun, commands):
    stdout = io.StringIO()
    stdin = io.StringIO("\n".join(commands) + "\n")
    fun(stdin, stdout)
    return stdout.getvalue()


def test_breakpoint_eager_disable_jit_and_jit():
    def f(x, stdin, stdout):
        y = x * 2
        jax.debug.breakpoint(stdin=stdin, stdout=stdout)
        return y + 1

    cmds = ["p y", "p x.sum()", "w", "c"]
    eager = _run_breakpoint(lambda i, o: f(jnp.arange(3.0), i, o), cmds)
    assert "Array([0., 2., 4.]" in eager and "Array(3." in eager and "test_debug_print.py" in eager
    with jax.disable_jit():
        dj = _run_breakpoint(lambda i, o: jax.jit(f, static_argnums=(1, 2))(jnp.arange(3.0), i, o), cmds)
    assert "Array([0., 2., 4.]" in dj
    jitted = _run_breakpoint(lambda i, o: jax.jit(f, static_argnums=(1, 2))(jnp.arange(3.0), i, o), cmds)
    assert "Array([0., 2., 4.]" in jitted and jitted.startswith("Entering jdb:\n(jdb) ")


def _debugger_session(lib, commands, jit):
    def f(x, stdin, stdout):
        y = x * 2
        lib.debug.breakpoint(stdin=stdin, stdout=stdout)
        return y + 1
    g = lib.jit(f, static_argnums=(1, 2)) if jit else f
    return _run_breakpoint(lambda i, o: g(lib.numpy.arange(3.0), i, o), commands)


@pytest.mark.parametrize("jit", [False, True])
def test_breakpoint_session_prints_as_jaxs_jdb(jit):
    import jax as real_jax
    cmds = ["p y", "p x.sum()", "y", "c"]
    ours = _debugger_session(jax, cmds, jit)
    assert ours == _debugger_session(real_jax, cmds, jit)


def test_breakpoint_quit_and_end_of_input_exit_the_program():
    for cmds, jit in ((["q"], False), ([], False), (["q"], True)):
        with pytest.raises(SystemExit):
            _debugger_session(jax, cmds, jit=jit)
    assert float(jax.jit(lambda x: x + 1)(1.0)) == 2.0  # the runtime is still usable


def _multi_frame_session(lib, jit):
    def inner(x, params, stdin, stdout):
        y = x * 2
        lib.debug.breakpoint(stdin=stdin, stdout=stdout)
        return y + params[0]

    def outer(x, stdin, stdout):
        z = x + 1
        return inner(z, (z * 3, "name"), stdin, stdout)

    g = lib.jit(outer, static_argnums=(1, 2)) if jit else outer
    out = _run_breakpoint(lambda i, o: g(lib.numpy.arange(3.0), i, o),
                          ["p params", "l", "u", "p z", "z * 2", "d", "d", "p nosuch", "c"])
    where = _run_breakpoint(lambda i, o: g(lib.numpy.arange(3.0), i, o), ["w", "c"])
    # the outermost frames are pytest's: compare the user's end of the traceback
    return out, where.split("Traceback:")[0], where.splitlines()[-5:]


@pytest.mark.parametrize("jit", [False, True])
def test_breakpoint_frames_up_down_list_where_as_jaxs_jdb(jit):
    # (a pytree local holding traced values comes back with its arrays, in every frame)
    import jax as real_jax
    assert _multi_frame_session(jax, jit) == _multi_frame_session(real_jax, jit)


def _two_call_programs(lib, results):
    return {
        "print": lambda: lib.jit(lambda x: lib.debug.print(ordered=True)("x: {x}", x=x))(42),
        "callback": lambda: lib.debug.callback(ordered=True)(lambda v: results.append(int(v)),
                                                           100),
        "skip_format_check": lambda: lib.debug.print("x {}", 1, 2, skip_format_check=True),
        "partitioned": lambda: lib.jit(lambda x: lib.debug.print("p {}", x, partitioned=True))(3),
        "log": lambda: lib.debug.log(ordered=True)("l {}", 3),
    }


@pytest.mark.parametrize("name", ["print", "callback", "skip_format_check", "partitioned", "log"])
def test_two_call_form_and_options_match_jax(name, capfd):
    import jax as real_jax
    outputs = []
    for lib in (real_jax, jax):
        results = []
        _two_call_programs(lib, results)[name]()
        lib.effects_barrier()
        outputs.append((capfd.readouterr().out, results))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("call,error,match", [
    (lambda lib: lib.debug.print(ordered=True)("hello {a}", a=42, partitioned=True), ValueError,
     r"Unused keyword arguments to `jax.debug.print`: \['partitioned'\]"),
    (lambda lib: lib.debug.callback(ordered=True, a=42), TypeError,
     "debug_callback received unexpected arguments in the two-call form"),
    (lambda lib: lib.debug.print(None, 42, ordered=True), TypeError,
     "debug_print received unexpected arguments in the two-call form"),
])
def test_two_call_form_misuse_raises_jax_errors(call, error, match):
    import jax as real_jax
    for lib in (real_jax, jax):
        with pytest.raises(error, match=match):
            call(lib)
