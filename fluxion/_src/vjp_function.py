"""The function `vjp` returns: a pytree whose leaves are the residuals of the linearization
(its jaxpr and trees are static), so that it can be returned from and passed to `jit`."""
from __future__ import annotations

from fluxion._src import ad, core, dtypes
from fluxion._src.tree_util import register_pytree_node, tree_flatten, tree_unflatten

_TOO_MANY_ARGS = """
The function returned by `jax.vjp` applied to {} was called with {} arguments,
but functions returned by `jax.vjp` must be called with a single argument
corresponding to the single value returned by the function being differentiated
(even if that returned value is a tuple or other container).

For example, if we have:

  def f(x):
    return (x, x)
  _, f_vjp = jax.vjp(f, 1.0)

the function `f` returns a single tuple as output, and so we call `f_vjp` with a
single tuple as its argument:

  x_bar, = f_vjp((2.0, 2.0))

If we instead call `f_vjp(2.0, 2.0)`, with the values 'splatted out' as
arguments rather than in a tuple, this error can arise.
"""


class _Static:
    """What a VJP keeps besides its residuals; compared by identity (in jit cache keys)."""

    __slots__ = ("jaxpr", "in_tree", "out_tree", "in_avals", "out_avals", "name")

    def __init__(self, jaxpr, in_tree, out_tree, in_avals, out_avals, name):
        self.jaxpr, self.in_tree, self.out_tree = jaxpr, in_tree, out_tree
        self.in_avals, self.out_avals, self.name = in_avals, out_avals, name


class VJP:
    """``vjp_fun(cotangent)``: the cotangents of the primals (a tuple with their structure),
    given a cotangent of the output (with its structure)."""

    __slots__ = ("residuals", "static")

    def __init__(self, residuals, static: _Static):
        self.residuals = residuals
        self.static = static

    def __call__(self, cotangent, *extra_args):
        st = self.static
        if extra_args:
            raise TypeError(_TOO_MANY_ARGS.format(st.name, len(extra_args) + 1))
        ct_leaves, ct_tree = tree_flatten(cotangent)
        if ct_tree != st.out_tree:  # JAX's class
            raise ValueError(f"Tree structure of cotangent input {ct_tree}, does not match "
                             f"structure of primal output {st.out_tree}.")
        cts = []
        for ct, a in zip(ct_leaves, st.out_avals):
            ca, expected = core.get_aval(ct), ad.tangent_aval(a)
            # JAX's check: the output's tangent type exactly (any value for an integer output)
            if ca.shape != a.shape or (expected.dtype != dtypes.float0
                                       and ca.dtype != expected.dtype):
                from fluxion._src.ad_api import _long
                raise ValueError(
                    "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
                    f"{_long(ca.update(weak_type=False))}, but expected "
                    f"{_long(expected.update(weak_type=False))} because the corresponding output "
                    f"of the differentiated function had JAX type {_long(a)}")
            if expected.dtype == dtypes.float0 or ca.dtype == dtypes.float0:
                ct = ad.Zero(expected)
            cts.append(ct)
        undefined = [ad.UndefinedPrimal(a) for a in st.in_avals]
        in_cts = ad.backward_pass(st.jaxpr, self.residuals, undefined, cts)
        in_cts = [ad.instantiate(ct) for ct in in_cts]
        return tree_unflatten(st.in_tree, in_cts)

    def with_refs(self, *maybe_ct_refs):
        """A function of the cotangent that sends each primal's cotangent where
        `maybe_ct_refs` (with the primals' structure) says: `GradValue()` returns it,
        `DontWant()` drops it (giving `DidntWant()`), a Ref has it added (giving `GradRef()`)."""
        from fluxion._src.grad_refs import apply_with_refs
        return lambda cotangent: apply_with_refs(self, maybe_ct_refs, cotangent)

    def __repr__(self):
        return f"VJP({self.static.name})"


register_pytree_node(VJP, lambda v: (v.residuals, v.static),
                     lambda static, residuals: VJP(list(residuals), static))
