"""Bad input catalogue: misused transformations, static arguments, pytrees, tracers, donation."""
from catalogue import Case, family_test


def np_(m):
    return m.numpy


def _leak(m):
    box = []
    m.jit(lambda x: box.append(x) or x)(1.0)
    return box[0] + 1


def _donated_then_used(m):
    f = m.jit(lambda a: a * 2, donate_argnums=0)
    x = np_(m).arange(3.0)
    f(x)
    return x + 1


def _deleted_then_jit(m):
    x = np_(m).arange(3.0)
    x.delete()
    return m.jit(lambda a: a * 2)(x)


CASES = [
    # not callables
    Case("jit_int", lambda m: m.jit(3)),
    Case("jit_none", lambda m: m.jit(None)),
    Case("grad_int", lambda m: m.grad(3)),
    Case("vmap_str", lambda m: m.vmap("f")),
    Case("jacfwd_int", lambda m: m.jacfwd(1)),
    Case("jacrev_int", lambda m: m.jacrev(1)),
    Case("hessian_str", lambda m: m.hessian("f")),
    Case("value_and_grad_none", lambda m: m.value_and_grad(None)),
    Case("jvp_int", lambda m: m.jvp(3, (1.0,), (1.0,))),
    Case("vjp_int", lambda m: m.vjp(3, 1.0)),
    Case("linearize_int", lambda m: m.linearize(3, 1.0)),
    # static arguments
    Case("static_argnums_beyond", lambda m: m.jit(lambda a: a, static_argnums=3)),
    Case("static_argnums_tuple_beyond", lambda m: m.jit(lambda a: a, static_argnums=(0, 1))),
    Case("static_unhashable", lambda m: m.jit(lambda a, b: a, static_argnums=1)(1.0, [1])),
    Case("static_array", lambda m: m.jit(lambda a, b: a, static_argnums=1)(1.0, np_(m).ones(2))),
    Case("argnums_beyond_call", lambda m: m.grad(lambda a: a, argnums=2)(1.0)),
    Case("donate_and_static", lambda m: m.jit(lambda a: a, static_argnums=0, donate_argnums=0)),
    # grad inputs and outputs
    Case("grad_int_input", lambda m: m.grad(lambda x: x * 1.0)(1)),
    Case("grad_vector_output", lambda m: m.grad(lambda x: x)(np_(m).ones(3))),
    Case("grad_complex_output", lambda m: m.grad(lambda x: x * 1j)(1.0)),
    Case("grad_string_input", lambda m: m.grad(lambda x: x)("a")),
    Case("jvp_tangent_shape", lambda m: m.jvp(lambda x: x, (np_(m).ones(3),), (np_(m).ones(2),))),
    Case("jvp_tangent_dtype", lambda m: m.jvp(lambda x: x, (np_(m).ones(3),), (np_(m).ones(3, int),))),
    Case("jvp_not_tuple", lambda m: m.jvp(lambda x: x, 1.0, 1.0)),
    Case("jvp_tree_mismatch", lambda m: m.jvp(lambda x, y: x, (1.0, 2.0), (1.0,))),
    Case("vjp_cotangent_shape", lambda m: m.vjp(lambda x: x, np_(m).ones(3))[1](np_(m).ones(2))),
    # vmap
    Case("vmap_in_axes_length", lambda m: m.vmap(lambda x, y: x, in_axes=(0,))(np_(m).ones(3), np_(m).ones(3))),
    Case("vmap_axis_sizes", lambda m: m.vmap(lambda x, y: x + y)(np_(m).ones(3), np_(m).ones(4))),
    Case("vmap_axis_out_of_range", lambda m: m.vmap(lambda x: x, in_axes=2)(np_(m).ones(3))),
    Case("vmap_scalar_mapped", lambda m: m.vmap(lambda x: x)(1.0)),
    Case("vmap_no_mapped_input", lambda m: m.vmap(lambda x: x, in_axes=None)(np_(m).ones(3))),
    Case("vmap_out_axes_beyond", lambda m: m.vmap(lambda x: x, out_axes=3)(np_(m).ones(3))),
    Case("vmap_in_axes_tree", lambda m: m.vmap(lambda d: d["a"], in_axes=({"b": 0},))({"a": np_(m).ones(2)})),
    Case("vmap_unbound_axis_name", lambda m: m.vmap(lambda x: m.lax.psum(x, "i"))(np_(m).ones(2))),
    # pytrees
    Case("tree_map_mismatch", lambda m: m.tree_util.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])),
    Case("tree_map_dict_keys", lambda m: m.tree_util.tree_map(lambda a, b: a, {"a": 1}, {"b": 1})),
    Case("tree_unflatten_count", lambda m: m.tree_util.tree_unflatten(m.tree_util.tree_structure([1, 2]), [1])),
    # A weakly typed int carry may become float, as in JAX.
    Case("scan_carry_weak_int", lambda m: m.lax.scan(lambda c, x: (c + x, None), 0,
                                                     np_(m).ones(3))[0], raises=None, compare=True),
    Case("scan_carry_structure", lambda m: m.lax.scan(lambda c, x: ((c, c), None), 0.0, np_(m).ones(3))),
    Case("cond_branch_types", lambda m: m.lax.cond(True, lambda: 1.0, lambda: np_(m).ones(2))),
    Case("cond_branch_structure", lambda m: m.lax.cond(True, lambda: (1.0, 2.0), lambda: 1.0)),
    Case("cond_predicate_shape", lambda m: m.lax.cond(np_(m).ones(2) > 0, lambda: 1.0, lambda: 2.0)),
    Case("switch_no_branches", lambda m: m.lax.switch(0, [])),
    Case("while_cond_not_scalar", lambda m: m.lax.while_loop(lambda c: c > 0, lambda c: c - 1, np_(m).ones(2))),
    Case("fori_loop_weak_int", lambda m: m.lax.fori_loop(0, 3, lambda i, c: c + 1.0, 0),
         raises=None, compare=True),
    Case("scan_carry_dtype", lambda m: m.lax.scan(lambda c, x: (c + x, None), np_(m).int32(0),
                                                  np_(m).ones(3))),
    Case("jit_returns_string", lambda m: m.jit(lambda x: "hi")(1.0)),
    Case("jit_argument_object", lambda m: m.jit(lambda x: x)(object())),
    Case("jit_argument_string", lambda m: m.jit(lambda x: x)("abc")),
    # tracers where values are needed
    Case("bool_of_tracer", lambda m: m.jit(lambda x: 1.0 if x > 0 else 2.0)(1.0)),
    Case("int_of_tracer", lambda m: m.jit(lambda x: np_(m).zeros(int(x)))(3)),
    Case("float_of_tracer", lambda m: m.jit(lambda x: float(x))(3.0)),
    Case("numpy_of_tracer", lambda m: m.jit(lambda x: __import__("numpy").asarray(x))(3.0)),
    Case("shape_from_tracer", lambda m: m.jit(lambda n: np_(m).ones(n))(3)),
    Case("arange_tracer", lambda m: m.jit(lambda n: np_(m).arange(n))(3)),
    Case("nonzero_in_jit", lambda m: m.jit(lambda x: np_(m).nonzero(x))(np_(m).ones(3))),
    Case("grad_of_bool_branch", lambda m: m.grad(lambda x: x if x > 0 else -x)(1.0), raises=None),
    Case("leaked_tracer", _leak),
    # deleted and donated arrays
    Case("deleted_then_jit", _deleted_then_jit, raises=RuntimeError, match="deleted"),
    Case("donated_then_used", _donated_then_used, raises=RuntimeError, match="deleted"),
]

test_case = family_test(CASES, __file__)
