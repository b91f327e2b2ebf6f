"""Cases fluxion does not support, each refused with a NotImplementedError that says so, the
class JAX 0.10.2 raises there too (checked against JAX in the same test)."""
import types

import jax
import jax.numpy as jjnp
import jax.scipy.fft  # noqa: F401  (lib.scipy.<module> below)
import jax.scipy.linalg  # noqa: F401  (lib.scipy.<module> below)
import jax.scipy.ndimage  # noqa: F401  (lib.scipy.<module> below)
import jax.scipy.special  # noqa: F401  (lib.scipy.<module> below)
import jax.scipy.stats  # noqa: F401  (lib.scipy.<module> below)
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fjnp
import fluxion.scipy.fft  # noqa: F401  (lib.scipy.<module> below)
import fluxion.scipy.linalg  # noqa: F401  (lib.scipy.<module> below)
import fluxion.scipy.ndimage  # noqa: F401  (lib.scipy.<module> below)
import fluxion.scipy.special  # noqa: F401  (lib.scipy.<module> below)
import fluxion.scipy.stats  # noqa: F401  (lib.scipy.<module> below)


def _namespace(lib, jnp):
    x = jnp.arange(6.).reshape(2, 3)
    return types.SimpleNamespace(jax=lib, jnp=jnp, sp=lib.scipy.special, sl=lib.scipy.linalg,
                                 st=lib.scipy.stats, sf=lib.scipy.fft, nd=lib.scipy.ndimage,
                                 x=x, i=jnp.array([0, 1]))


CASES = {
    "take_raise": lambda m: m.jnp.take(m.x, m.i, mode="raise"),
    "put_raise": lambda m: m.jnp.put(m.x, m.i, 1.0, mode="raise", inplace=False),
    "einsum_out": lambda m: m.jnp.einsum("ij->ji", m.x, out=m.x),
    "round_out": lambda m: m.jnp.round(m.x, out=m.x),
    "trace_out": lambda m: m.jnp.trace(m.x, out=m.x),
    "outer_out": lambda m: m.jnp.outer(m.x, m.x, out=m.x),
    "stack_out": lambda m: m.jnp.stack([m.x], out=m.x),
    "compress_out": lambda m: m.jnp.compress(m.jnp.array([True, False]), m.x, axis=0,
                                             out=m.x),
    "choose_out": lambda m: m.jnp.choose(m.jnp.array([0, 0]), [m.i], out=m.i),
    "modf_out": lambda m: m.jnp.modf(m.x, out=m.x),
    "nanvar_out": lambda m: m.jnp.nanvar(m.x, out=m.x),
    "nanstd_out": lambda m: m.jnp.nanstd(m.x, out=m.x),
    "take_out": lambda m: m.jnp.take(m.x, m.i, out=m.x),
    "round_int_neg": lambda m: m.jnp.round(m.jnp.arange(30), -1),
    "gradient_edge2": lambda m: m.jnp.gradient(m.jnp.arange(5.) ** 2, edge_order=2),
    "ix_bool": lambda m: m.jnp.ix_(m.jnp.array([True, False])),
    "flat": lambda m: m.x.flat,
    "reshape_A": lambda m: m.jnp.reshape(m.x, (3, 2), order="A"),
    "array_order_F": lambda m: m.jnp.array(m.x, order="F"),
    "zeta_noq": lambda m: m.sp.zeta(2.0),
    "factorial_exact": lambda m: m.sp.factorial(3, exact=True),
    "dct_type1": lambda m: m.sf.dct(m.x, type=1),
    "eigh_b": lambda m: m.sl.eigh(m.jnp.eye(2), m.jnp.eye(2)),
    "eigh_eigvals": lambda m: m.sl.eigh(m.jnp.eye(2), eigvals=(0, 1)),
    "eigh_type2": lambda m: m.sl.eigh(m.jnp.eye(2), type=2),
    "mode_omit": lambda m: m.st.mode(m.x, nan_policy="omit"),
    "rankdata_omit": lambda m: m.st.rankdata(m.x, nan_policy="omit"),
    "map_coords_order3": lambda m: m.nd.map_coordinates(m.x, [m.jnp.zeros(2)] * 2, order=3),
    "kde_complex": lambda m: m.st.gaussian_kde(m.jnp.array([1 + 1j, 2.0, 3.0])),
    "sph_harm_diff": lambda m: m.sp.sph_harm_y(1, 0, 0.5, 0.5, diff_n=1),
    "tridiag_v": lambda m: m.sl.eigh_tridiagonal(m.jnp.ones(3), m.jnp.ones(2), eigvals_only=True,
                                               select="v", select_range=(0, 1)),
    "view_type": lambda m: m.x.view(type=np.ndarray),
    "psum_groups": lambda m: m.jax.vmap(
        lambda v: m.jax.lax.psum(v, "b", axis_index_groups=[[0, 1]]), axis_name="b")(
            m.jnp.ones(2)),
}


@pytest.mark.parametrize("name", CASES)
def test_refused_with_not_implemented_error_as_in_jax(name):
    call = CASES[name]
    with pytest.raises(NotImplementedError) as ours:
        call(_namespace(fluxion, fjnp))
    assert str(ours.value).strip(), "the error must say what is not supported"
    with pytest.raises(NotImplementedError):
        call(_namespace(jax, jjnp))
