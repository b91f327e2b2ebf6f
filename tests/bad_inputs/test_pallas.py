"""Bad input catalogue: pallas_call (block specs, index maps, grids, out_shape, aliases) and
the kernel language; errors name the kernel and the block. JAX runs its kernels with
interpret=True on the CPU."""
import importlib

import numpy as np

from catalogue import Case, family_test


def np_(m):
    return m.numpy


def pl(m):
    return importlib.import_module(m.__name__ + ".experimental.pallas")


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _call(m, kernel, out_shape, *args, **kw):
    return pl(m).pallas_call(kernel, out_shape, interpret=True, **kw)(*args)


def _sds(m, shape, dtype=np.float32):
    return m.ShapeDtypeStruct(shape, dtype)


def _x(m, shape=(8,)):
    return np_(m).arange(np.prod(shape), dtype=np.float32).reshape(shape)


def _spec(m, block, index_map):
    return pl(m).BlockSpec(block, index_map)



CASES = [
    Case("block_rank_mismatch", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (4, 1), lambda i: (i, 0))], out_specs=_spec(m, (4,), lambda i: (i,))),
         match="_copy"),
    Case("out_block_rank_mismatch", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (4,), lambda i: (i,))], out_specs=_spec(m, (4, 2), lambda i: (i, 0))),
         match="_copy"),
    Case("index_map_wrong_arity", lambda m: _call(
        m, _copy, _sds(m, (8, 4)), _x(m, (8, 4)), grid=(2,),
        in_specs=[_spec(m, (4, 4), lambda i: (i,))], out_specs=_spec(m, (4, 4), lambda i: (i, 0))),
         match="_copy"),
    Case("index_map_too_many_indices", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (4,), lambda i: (i, 0, 0))], out_specs=_spec(m, (4,), lambda i: (i,))),
         match="_copy"),
    Case("index_map_grid_arguments", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (4,), lambda i, j: (i,))], out_specs=_spec(m, (4,), lambda i: (i,))), match='missing 1 required positional argument'),
    Case("in_specs_count", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (4,), lambda i: (i,))] * 2, out_specs=_spec(m, (4,), lambda i: (i,))),
         match="_copy"),
    Case("in_specs_too_few", lambda m: _call(
        m, _add, _sds(m, (8,)), _x(m), _x(m), grid=(2,),
        in_specs=[_spec(m, (4,), lambda i: (i,))], out_specs=_spec(m, (4,), lambda i: (i,))),
         match="_add"),
    Case("out_specs_count", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (4,), lambda i: (i,))],
        out_specs=[_spec(m, (4,), lambda i: (i,))] * 2), match="_copy"),
    # A block that does not divide the array is padded (reads) and clipped (writes), as in JAX.
    Case("block_not_dividing", lambda m: _call(
        m, lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...] * 2), _sds(m, (8,)),
        _x(m), grid=(3,), in_specs=[_spec(m, (3,), lambda i: (i,))],
        out_specs=_spec(m, (3,), lambda i: (i,))), raises=None, compare=True),
    Case("kernel_arity", lambda m: _call(m, _add, _sds(m, (8,)), _x(m)), match='o_ref'),
    Case("kernel_writes_wrong_shape", lambda m: _call(
        m, lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, np_(m).ones(5)), _sds(m, (8,)),
        _x(m)), match="shape"),
    Case("kernel_reads_out_of_block", lambda m: _call(
        m, lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[0:4, 0]), _sds(m, (4,)),
        _x(m, (4,))), match="longer than"),
    Case("out_shape_not_a_shape", lambda m: _call(m, _copy, (8,), _x(m)), match="out_shape"),
    Case("out_shape_bad_dtype", lambda m: _call(m, _copy, _sds(m, (8,), "float33"), _x(m)), match='float33'),
    Case("block_negative", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (-4,), lambda i: (i,))], out_specs=_spec(m, (4,), lambda i: (i,))),
         match="_copy"),
    Case("block_zero", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,),
        in_specs=[_spec(m, (0,), lambda i: (i,))], out_specs=_spec(m, (4,), lambda i: (i,))),
         match="_copy"),
    Case("grid_not_int", lambda m: _call(m, _copy, _sds(m, (8,)), _x(m), grid=(2.5,)),
         match="[Gg]rid"),
    Case("in_spec_not_blockspec", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), grid=(2,), in_specs=[4],
        out_specs=_spec(m, (4,), lambda i: (i,))), raises=TypeError, match="BlockSpec",
         jax_ok=False),  # JAX: AttributeError ('int' object has no attribute 'memory_space')
    Case("alias_index_out_of_range", lambda m: _call(
        m, _copy, _sds(m, (8,)), _x(m), input_output_aliases={3: 0}), match='input_output_aliases'),
    Case("alias_shape_mismatch", lambda m: _call(
        m, _copy, _sds(m, (4,)), _x(m), input_output_aliases={0: 0}), match='input_output_aliases'),
    Case("alias_dtype_mismatch", lambda m: _call(
        m, _copy, _sds(m, (8,), np.int32), _x(m), input_output_aliases={0: 0}), match='input_output_aliases'),
    Case("program_id_outside_kernel", lambda m: pl(m).program_id(0), raises=RuntimeError,
         match="inside a kernel", jax_ok=False),  # JAX: a bare AssertionError
    Case("program_id_beyond_grid", lambda m: _call(
        m, lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...] + pl(m).program_id(3)),
        _sds(m, (8,)), _x(m), grid=(2,), in_specs=[_spec(m, (4,), lambda i: (i,))],
        out_specs=_spec(m, (4,), lambda i: (i,))), match="Axis 3"),
    # JAX accepts a traced size here (and fails later, if the size is used as a shape).
    Case("ds_traced_size", lambda m: m.jit(lambda n: pl(m).ds(0, n))(3), raises=TypeError,
         match="static int", jax_ok=False),
]

test_case = family_test(CASES, __file__)
