"""fluxion.lax has every public name of jax.lax, except the ones listed here with the reason."""
import inspect

import jax
import numpy as np

import fluxion
from fluxion import lax
from fluxion._src.core import Primitive

NOT_HERE: dict = {}


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


def test_every_jax_lax_name_exists():
    missing = sorted(_public(jax.lax) - _public(lax) - set(NOT_HERE))
    assert not missing, f"fluxion.lax lacks {len(missing)} names of jax.lax: {missing}"


def test_exceptions_are_still_missing_and_real():
    # An exception that has since been built (or that JAX dropped) must leave the list.
    assert set(NOT_HERE) <= _public(jax.lax)
    assert not (set(NOT_HERE) & _public(lax))


def test_primitive_names_are_primitives_with_jax_names():
    for name in sorted(_public(jax.lax)):
        if not name.endswith("_p") or name in NOT_HERE:
            continue
        ours, theirs = getattr(lax, name), getattr(jax.lax, name)
        assert isinstance(ours, Primitive), name
        assert ours.name == theirs.name, (name, ours.name, theirs.name)


def test_exported_primitives_are_the_ones_the_functions_bind():
    x = np.linspace(0.1, 0.9, 6, dtype=np.float32).reshape(2, 3)
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    unary = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos",
             "cosh", "digamma", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor",
             "is_finite", "lgamma", "log", "log1p", "logistic", "neg", "round",
             "rsqrt", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "bessel_i0e",
             "bessel_i1e", "stop_gradient"]
    binary = ["add", "atan2", "div", "eq", "ge", "gt", "le", "lt", "max", "min", "mul", "ne",
              "nextafter", "pow", "rem", "sub", "igamma", "igammac", "zeta", "polygamma"]
    int_ops = {"clz": (i,), "population_count": (i,), "not": (i,), "and": (i, i),
               "or": (i, i), "xor": (i, i), "shift_left": (i, i), "shift_right_logical": (i, i),
               "shift_right_arithmetic": (i, i), "mulhi": (i, i)}
    calls = {n: (getattr(lax, n), (x,)) for n in unary}
    calls.update({n: (getattr(lax, n), (x, x)) for n in binary})
    renamed = {"not": "bitwise_not", "and": "bitwise_and", "or": "bitwise_or",
               "xor": "bitwise_xor"}
    calls.update({n: (getattr(lax, renamed.get(n, n)), a) for n, a in int_ops.items()})
    calls.update({
        "conj": (lax.conj, (x,)), "complex": (lax.complex, (x, x)),
        "real": (lax.real, (x + 1j,)), "imag": (lax.imag, (x + 1j,)),
        "integer_pow": (lambda a: lax.integer_pow(a, 3), (x,)),
        "broadcast_in_dim": (lambda a: lax.broadcast_in_dim(a, (4, 2, 3), (1, 2)), (x,)),
        "reshape": (lambda a: lax.reshape(a, (3, 2)), (x,)),
        "transpose": (lambda a: lax.transpose(a, (1, 0)), (x,)),
        "rev": (lambda a: lax.rev(a, (0,)), (x,)),
        "pad": (lambda a: lax.pad(a, np.float32(0), [(1, 0, 0), (0, 1, 1)]), (x,)),
        "slice": (lambda a: lax.slice(a, (0, 1), (2, 3)), (x,)),
        "squeeze": (lambda a: lax.squeeze(a[None], (0,)), (x,)),
        "concatenate": (lambda a: lax.concatenate([a, a], 0), (x,)),
        "clamp": (lambda a: lax.clamp(np.float32(0.2), a, np.float32(0.5)), (x,)),
        "select_n": (lambda a: lax.select_n(a > 0.5, a, a), (x,)),
        "convert_element_type": (lambda a: lax.convert_element_type(a, np.int32), (x,)),
        "bitcast_convert_type": (lambda a: lax.bitcast_convert_type(a, np.int32), (x,)),
        "reduce_precision": (lambda a: lax.reduce_precision(a, 5, 10), (x,)),
        "iota": (lambda: lax.iota(np.int32, 4), ()),
        "dot_general": (lambda a: lax.dot_general(a, a, (((1,), (1,)), ((), ()))), (x,)),
        "dynamic_slice": (lambda a: lax.dynamic_slice(a, (0, 1), (1, 2)), (x,)),
        "dynamic_update_slice": (lambda a: lax.dynamic_update_slice(a, a[:1], (1, 0)), (x,)),
        "reduce_sum": (lambda a: lax.reduce_sum(a, (0,)), (x,)),
        "reduce_max": (lambda a: lax.reduce_max(a, (0,)), (x,)),
        "reduce_min": (lambda a: lax.reduce_min(a, (0,)), (x,)),
        "reduce_prod": (lambda a: lax.reduce_prod(a, (0,)), (x,)),
        "reduce_and": (lambda a: lax.reduce_and(a > 0.5, (0,)), (x,)),
        "reduce_or": (lambda a: lax.reduce_or(a > 0.5, (0,)), (x,)),
        "reduce_xor": (lambda a: lax.reduce_xor(a > 0.5, (0,)), (x,)),
        "regularized_incomplete_beta": (lambda a: lax.betainc(a, a, a), (x,)),
        "igamma_grad_a": (lax.igamma_grad_a, (x, x)),
        "stack": (lambda a: lax.stack([a, a]), (x,)),
        "unstack": (lambda a: lax.unstack(a), (x,)),
        "tile": (lambda a: lax.tile(a, (1, 2)), (x,)),
        "split": (lambda a: lax.split(a, (1, 2), 1), (x,)),
        "optimization_barrier": (lambda a: lax.optimization_barrier(a), (x,)),
        "approx_top_k": (lambda a: lax.approx_max_k(a, 2), (x,)),
        "fft": (lambda a: lax.fft(a, "FFT", (3,)), (x,)),
        "rng_uniform": (lambda: lax.rng_uniform(np.float32(0), np.float32(1), (2,)), ()),
        "rng_bit_generator": (lambda: lax.rng_bit_generator(np.zeros(4, np.uint32), (2,)), ()),
    })
    for name, (fn, args) in calls.items():
        prim = getattr(lax, name + "_p")
        eqns = fluxion.make_jaxpr(fn)(*args).jaxpr.eqns
        assert prim in {e.primitive for e in eqns}, name


def test_function_signatures_match_jax():
    names = ["fft", "stack", "unstack", "tile", "split", "optimization_barrier", "mulhi",
             "rng_bit_generator", "rng_uniform", "broadcast_like", "batch_matmul", "empty",
             "index_take", "approx_max_k", "approx_min_k", "ragged_dot", "igamma", "igammac",
             "igamma_grad_a", "betainc", "zeta", "bessel_i0e", "bessel_i1e",
             "conv_general_dilated_patches", "conv_general_dilated_local",
             "conv_transpose_shape_tuple", "platform_dependent", "composite", "scaled_dot", "dce_sink"]
    for name in names:
        ours = list(inspect.signature(getattr(lax, name)).parameters)
        theirs = list(inspect.signature(getattr(jax.lax, name)).parameters)
        assert ours == theirs, (name, ours, theirs)
