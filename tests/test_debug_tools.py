"""debug_nans/debug_infs, source locations, profiler, to_ir and the runtime tools."""
import glob
import gzip
import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import fluxion as jax
import fluxion.numpy as jnp
from fluxion import lax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def debug_nans():
    jax.config.update("debug_nans", True)
    try:
        yield
    finally:
        jax.config.update("debug_nans", False)


def _nan_fn(x):
    y = x * 2
    z = jnp.log(y - 10)  # NAN-LINE
    return z + 1


NAN_LINE = next(i for i, l in enumerate(open(__file__), 1) if "# NAN-LINE" in l)


@pytest.mark.parametrize("jitted", [False, True])
def test_debug_nans_names_primitive_and_line(debug_nans, jitted):
    f = jax.jit(_nan_fn) if jitted else _nan_fn
    with pytest.raises(FloatingPointError) as info:
        f(jnp.ones(3))
    msg = str(info.value)
    assert "invalid value (nan) encountered in log" in msg
    assert f"{__file__}:{NAN_LINE}" in msg


def test_debug_nans_in_jit_prints_jax_notice(debug_nans, capsys):
    """The line JAX prints before re-running a jitted function that made a NaN."""
    import jax as real_jax
    notice = []
    for mod in (jax, real_jax):
        mod.config.update("jax_debug_nans", True)
        try:
            with pytest.raises(FloatingPointError):
                mod.jit(lambda x: x * 2 + 1)(np.array([1.0, np.nan], np.float32))
        finally:
            mod.config.update("jax_debug_nans", False)
        notice.append(capsys.readouterr().out.splitlines())
    jax.config.update("debug_nans", True)
    assert notice[0] == notice[1] == [
        "Invalid nan value encountered in the output of a jax.jit function. Calling the "
        "de-optimized version."]


def test_debug_nans_nested_jit_and_fast_path(debug_nans):
    g = jax.jit(lambda x: jax.jit(lambda a: jnp.sqrt(a - 5))(x) * 2)
    with pytest.raises(FloatingPointError, match="sqrt"):
        g(jnp.ones(2))
    h = jax.jit(lambda x: x + 1)
    h(jnp.ones(2))
    h(jnp.ones(2))  # seen before: still checked
    with pytest.raises(FloatingPointError):
        h(jnp.array([1.0, jnp.nan]))
    with pytest.raises(FloatingPointError, match="mul"):
        jax.jit(lambda x: x * np.nan)(jnp.ones(2))


def test_debug_nans_off_again_no_error():
    jax.config.update("debug_nans", True)
    jax.config.update("debug_nans", False)
    out = jax.jit(_nan_fn)(jnp.ones(3))
    assert np.isnan(np.asarray(out)).all()
    assert np.isnan(np.asarray(jnp.log(jnp.float32(-1.0))))


def test_debug_infs():
    jax.config.update("debug_infs", True)
    try:
        with pytest.raises(FloatingPointError, match=r"\(inf\) encountered in div"):
            jax.jit(lambda x: jnp.exp(x) / 0.0)(jnp.ones(2))
        with pytest.raises(FloatingPointError, match="inf"):
            jnp.float32(1.0) / jnp.float32(0.0)
        jax.jit(lambda x: jnp.log(x - 5))(jnp.ones(2))  # a NaN is not an Inf
    finally:
        jax.config.update("debug_infs", False)


def _jax_error(run):
    """The message of the FloatingPointError JAX raises from `run(jax_module, jnp_module)`."""
    import jax as real_jax
    import jax.numpy as real_jnp
    real_jax.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError) as info:
            run(real_jax, real_jnp)
    finally:
        real_jax.config.update("jax_debug_nans", False)
    return str(info.value)


def _nan_input_through_jit(lib, np_mod):
    lib.jit(lambda x: x * 3.)(np.nan)


def _nan_literal_out_of_jit(lib, np_mod):
    lib.jit(lambda x: (np_mod.nan, x + 2))(3)


@pytest.mark.parametrize("run", [_nan_input_through_jit, _nan_literal_out_of_jit])
def test_debug_nans_without_a_culprit_primitive(debug_nans, run):
    # JAX: the de-optimized function did not produce the NaN (an input or a literal did)
    assert "the de-optimized function did not" in _jax_error(run)
    with pytest.raises(FloatingPointError, match="the de-optimized function did not .*literals "
                                                 "or inputs"):
        run(jax, jnp)


def _pmap_div(lib, np_mod):
    lib.pmap(lambda x: 0. / x)(np_mod.zeros((1,)))


def _pmap_grad(lib, np_mod):
    _, pullback = lib.vjp(lib.pmap(lib.jit(lambda x: np_mod.log(x ** 2))), np_mod.zeros([1]))
    pullback(np_mod.ones([1]))


def _shard_map_div(lib, np_mod):
    mesh = lib.sharding.Mesh(np.array(lib.devices()[:1]), ("x",))
    spec = lib.sharding.PartitionSpec("x")
    lib.shard_map(lambda x: 0. / x, mesh=mesh, in_specs=spec, out_specs=spec)(
        np_mod.zeros((1,)))


@pytest.mark.parametrize("run", [_pmap_div, _pmap_grad, _shard_map_div])
def test_debug_nans_in_sharded_computations(debug_nans, run):
    message = _jax_error(run)
    with pytest.raises(FloatingPointError) as info:
        run(jax, jnp)
    assert str(info.value) == message == "Invalid value (nan) encountered in sharded computation."
    jax.pmap(lambda x: 0. / x)(jnp.ones((1,)))  # no NaN, no error


def test_every_op_has_user_location_and_name_stack():
    def f(x):
        with jax.named_scope("layer1"):
            y = jnp.sin(x) * 2
        return jax.named_call(lambda v: v.sum(), name="head")(y)

    lowered = jax.jit(f).lower(jnp.ones(3))
    # every op of @main (regions' inner ops aside) ends with its location, printed in place
    text = lowered.compiler_ir().operation.get_asm(enable_debug_info=True, use_local_scope=True)
    op_lines = [l for l in text.splitlines() if l.startswith("    ") and not l.startswith("     ")
                and not l.lstrip().startswith("return")]
    user_loc = re.compile(r'loc\("jit\(f\)/[^"]+"\("' + re.escape(__file__) + r'":\d+:0\)\)$')
    assert op_lines and all(user_loc.search(l) for l in op_lines), op_lines
    assert 'loc("jit(f)/layer1/sin"("' + __file__ in text
    # as_text prints them only when asked, as JAX
    assert "loc(" not in lowered.as_text()
    assert '"jit(f)/layer1/sin"' in lowered.as_text(debug_info=True)
    assert "jit(f)/head/reduce_sum" in text
    hlo = jax.jit(f).lower(jnp.ones(3)).compile().as_text()
    assert 'op_name="jit(f)/layer1/sin"' in hlo and os.path.basename(__file__) in hlo


def test_grad_and_vmap_ops_keep_user_lines():
    def f(x):
        return jnp.tanh(x) ** 2  # LOC-LINE

    line = next(i for i, l in enumerate(open(__file__), 1) if "# LOC-LINE" in l)
    text = jax.jit(jax.vmap(jax.grad(f))).lower(jnp.ones(3)).as_text(debug_info=True)
    assert f'"{__file__}":{line}:0' in text


def test_profiler_trace_parses_and_has_phases(tmp_path):
    from fluxion import profiler

    @profiler.annotate_function
    def step(x):
        return jax.jit(lambda v: jnp.tanh(v @ v))(x)

    with profiler.trace(str(tmp_path), create_perfetto_trace=True):
        for i in range(2):
            with profiler.StepTraceAnnotation("train", step_num=i):
                with profiler.TraceAnnotation("my_region"):
                    step(jnp.ones((16, 16))).block_until_ready()
    files = glob.glob(str(tmp_path / "plugins/profile/*/*.trace.json.gz"))
    assert files and glob.glob(str(tmp_path / "plugins/profile/*/*.xplane.pb"))
    assert glob.glob(str(tmp_path / "plugins/profile/*/perfetto_trace.json.gz"))
    events = json.load(gzip.open(files[0]))["traceEvents"]
    names = {e.get("name") for e in events}
    for want in ("my_region", "train", "fluxion.trace", "fluxion.lower", "fluxion.compile"):
        assert want in names, want
    assert any("step" in (n or "") for n in names)
    with pytest.raises(RuntimeError):
        profiler.stop_trace()


def test_profile_data_reads_the_trace(tmp_path):
    from fluxion import profiler
    with profiler.trace(str(tmp_path)):
        with profiler.TraceAnnotation("fx_profile_data_region"):
            jax.jit(lambda v: jnp.tanh(v) * 2)(jnp.ones((8, 8))).block_until_ready()
    (path,) = glob.glob(str(tmp_path / "plugins/profile/*/*.xplane.pb"))
    data = profiler.ProfileData.from_file(path)
    assert isinstance(data, profiler.ProfileData)
    same = profiler.ProfileData.from_serialized_xspace(open(path, "rb").read())
    assert [p.name for p in same.planes] == [p.name for p in data.planes]
    host = data.find_plane_with_name("/host:CPU")
    assert isinstance(host, profiler.ProfilePlane)
    events = [e for line in host.lines for e in line.events]
    assert all(isinstance(e, profiler.ProfileEvent) for e in events)
    region = [e for e in events if e.name == "fx_profile_data_region"]
    assert len(region) == 1 and region[0].duration_ns > 0
    assert region[0].end_ns - region[0].start_ns == pytest.approx(region[0].duration_ns, abs=1)
    assert any(e.name == "fluxion.execute" for e in events)


def test_register_subprocess_with_a_profiler_server():
    import socket
    import subprocess
    import sys
    from fluxion import profiler
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from jaxlib import _profiler; "
         f"s = _profiler.start_server({port}); print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        unregister = profiler.register_subprocess(child.pid, port)
        assert callable(unregister)
        unregister()
    finally:
        child.kill()
        child.communicate()


def test_device_memory_profile(tmp_path):
    from fluxion import profiler
    keep = jnp.ones((256, 256))
    data = profiler.device_memory_profile()
    assert isinstance(data, bytes) and len(data) > 0
    profiler.save_device_memory_profile(str(tmp_path / "mem.prof"))
    assert (tmp_path / "mem.prof").stat().st_size == len(data) or (tmp_path / "mem.prof").stat().st_size > 0
    del keep


def test_profiler_server_starts_and_stops():
    import socket
    from fluxion import profiler
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    profiler.start_server(port)
    with pytest.raises(ValueError):
        profiler.start_server(port)
    profiler.stop_server()


MODULE = '''
import fluxion.numpy as jnp
def f(x, y, *, scale=1.0):
    return jnp.tanh(x @ y) * scale
'''


@pytest.mark.parametrize("fmt", ["jaxpr", "stablehlo", "hlo", "optimized-hlo"])
def test_to_ir_cli(tmp_path, fmt):
    (tmp_path / "irmod.py").write_text(MODULE)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    out = subprocess.run([sys.executable, "-m", "fluxion.tools.to_ir", "irmod:f", "f32[2,3]",
                          "f32[3,4]", "--constants", "scale=2.0", "--format", fmt],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    if fmt == "jaxpr":
        assert "dot_general" in text and "f32[2,4]" in text
    elif fmt == "stablehlo":
        # the output compiles and computes the function
        from fluxion._src.compiler import backend
        from fluxion._src.core import ShapedArray
        exe = backend.compile_module(text, [ShapedArray((2, 4), np.float32)])
        from fluxion._src import dispatch
        a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
        bufs = [dispatch.to_device_buffer(v, ShapedArray(v.shape, v.dtype)) for v in (a, b)]
        out_arr = backend.to_numpy(exe.execute(bufs)[0], np.float32)
        np.testing.assert_allclose(out_arr, np.tanh(a @ b) * 2, rtol=1e-6)
    else:
        assert "HloModule" in text and "tanh" in text


def test_parse_shape_str():
    from fluxion.tools.to_ir import parse_shape_str
    s = parse_shape_str("f32[2,3]")
    assert s.shape == (2, 3) and s.dtype == np.float32
    assert parse_shape_str("s32[]").dtype == np.int32 and parse_shape_str("pred[4]").shape == (4,)
    t = parse_shape_str("(f32[2], u8[1,1])")
    assert isinstance(t, tuple) and t[1].dtype == np.uint8
    with pytest.raises(ValueError):
        parse_shape_str("q7[2]")


def test_explain_cache_misses(caplog):
    jax.config.update("explain_cache_misses", True)
    try:
        def fn(x, y):
            return x + y
        f = jax.jit(fn)
        with caplog.at_level(logging.WARNING, logger="fluxion"):
            f(jnp.ones(3), 1.0)
            f(jnp.ones(4), 1.0)
            f(jnp.ones(4), jnp.float32(1.0))
            f(jnp.ones(4, jnp.int32), jnp.float32(1.0))
        msgs = [r.getMessage() for r in caplog.records if "TRACING CACHE MISS" in r.getMessage()]
        assert "never seen function" in msgs[0]
        assert "for argument x: shape changed from f32[3] to f32[4]" in msgs[1]
        assert "for argument y: weak type changed" in msgs[2]
        assert "for argument x: dtype changed from f32[4] to i32[4]" in msgs[3]
    finally:
        jax.config.update("explain_cache_misses", False)


def test_clear_caches_and_live_arrays():
    f = jax.jit(lambda x: x * 3)
    f(jnp.ones(2))
    assert f._cache_size() == 1
    jax.clear_caches()
    assert f._cache_size() == 0
    np.testing.assert_allclose(f(jnp.ones(2)), 3.0)
    marker = jnp.arange(7.0) + 1
    assert any(a is marker for a in jax.live_arrays())
    marker.delete() if hasattr(marker, "delete") else None


def test_check_tracer_leaks():
    leaked = []
    jax.config.update("check_tracer_leaks", True)
    try:
        with pytest.raises(Exception, match="[Ll]eaked"):
            jax.jit(lambda x: leaked.append(x) or x)(1.0)
        jax.jit(lambda x: x + 1)(2.0)  # no leak: fine
    finally:
        jax.config.update("check_tracer_leaks", False)


def test_transfer_guard(caplog):
    x = np.ones(3, np.float32)
    f = jax.jit(lambda v: v * 2)
    with jax.transfer_guard("disallow"):
        with pytest.raises(RuntimeError, match="host-to-device"):
            f(x)
        y = jax.device_put(x)  # explicit: allowed
        out = f(y)
        with pytest.raises(RuntimeError, match="device-to-host"):
            np.asarray(out + 1)
        np.testing.assert_allclose(jax.device_get(out), 2.0)
    with jax.transfer_guard_host_to_device("log"), caplog.at_level(logging.WARNING, "fluxion"):
        f(x)
    assert any("host-to-device" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(f(x), 2.0)  # allowed again


def test_print_environment_info(capsys):
    text = jax.print_environment_info(return_string=True)
    assert "fluxion" in text and "jaxlib" in text and "numpy" in text
    jax.print_environment_info()
    assert "python" in capsys.readouterr().out


def test_graph_view(tmp_path):
    import re
    import xml.dom.minidom
    from fluxion import tools

    def f(x, w):
        y = jnp.tanh(x @ w)
        z = lax.cond(y.sum() > 0, lambda a: a * 2, lambda a: a, y)
        return lax.scan(lambda c, r: (c + r, r * 2), jnp.zeros(4), z)[0].sum()

    args = (jnp.ones((3, 4)), jnp.ones((4, 4)))
    page = tools.graph(f, path=str(tmp_path / "g.html"))(*args)
    assert (tmp_path / "g.html").read_text() == page
    for name in ("dot_general", "tanh", "cond", "scan", "f32[3,4]"):
        assert name in page
    assert "96 flops" in page  # XLA's count for the (3,4)@(4,4) product: 2*3*4*4
    assert page.count("<details>") >= 3  # cond's two branches and scan's body, collapsible
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        xml.dom.minidom.parseString(svg)
    only_svg = tools.graph(f, fmt="svg", cost_analysis=False)(*args)
    xml.dom.minidom.parseString(only_svg)
    assert "flops" not in only_svg


def test_debug_nans_inside_control_flow(debug_nans):
    def f(x):
        y = lax.cond(x > 0, lambda v: jnp.sqrt(-v), lambda v: v, x)  # COND-LINE
        return y

    with pytest.raises(FloatingPointError, match=r"encountered in sqrt at .*test_debug_tools.py"):
        jax.jit(f)(1.0)

    def g(xs):
        def body(c, x):
            return c + x, jnp.log(x - 2.0)
        return lax.scan(body, 0.0, xs)

    with pytest.raises(FloatingPointError, match="encountered in log"):
        jax.jit(g)(jnp.arange(5.0))

    def w(x):
        return lax.while_loop(lambda c: c < 3, lambda c: c + jnp.arccos(c), x)

    with pytest.raises(FloatingPointError, match="encountered in acos"):
        jax.jit(w)(0.5)


def test_name_stack_names_transformations():
    import re

    def f(x):
        with jax.named_scope("layer"):
            return jnp.sum(jnp.tanh(x) ** 2)

    text = jax.jit(jax.vmap(jax.grad(f))).lower(jnp.ones((2, 3))).as_text(debug_info=True)
    names = set(re.findall(r'loc\("([^"]+)"', text))
    assert "jit(f)/vmap(f)/jvp(f)/layer/tanh" in names
    assert any(n.startswith("jit(f)/vmap(f)/transpose(jvp(f))/layer/") for n in names)
