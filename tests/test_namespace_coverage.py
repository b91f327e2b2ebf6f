"""Every public name of JAX's namespaces exists in fluxion's, except those listed here with the
reason (docs/differences.md says more)."""
import importlib

import jax
import pytest

import fluxion

# namespace -> {missing name: reason}
_TOKENS = "tokens need a token type in the IR, the emitter and the runtime (not built yet)"
_SHARDING = "not built yet (issue 12)"
_SCHUR = "needs the Schur or Hessenberg decomposition (lax.linalg), not built yet"
_SPECIAL = "not built yet (issue 11)"
_HELPER = "an import inside JAX's module, not part of its API"
NOT_PROVIDED = {
    "lax": {"after_all": _TOKENS, "after_all_p": _TOKENS, "create_token": _TOKENS,
            "create_token_p": _TOKENS,
            "device_put_p": "fluxion's device_put is not a primitive",
            "precv": _SHARDING, "psend": _SHARDING, "pswapaxes": _SHARDING,
            "ragged_all_to_all": _SHARDING, "ragged_all_to_all_p": _SHARDING},
    "lax.linalg": {n: "no LAPACK lowering yet (issue 10)" for n in [
        "cholesky_update", "cholesky_update_p", "hessenberg", "hessenberg_p", "ormqr", "ormqr_p",
        "qdwh", "schur", "schur_p", "tridiagonal", "tridiagonal_p"]},
    "scipy.special": {n: _SPECIAL for n in [
        "bernoulli", "bessel_jn", "dawsn", "erfcx", "exp1", "expi", "expn", "fresnel", "hyp1f1",
        "hyp2f1", "owens_t", "sici", "spence", "sph_harm_y", "wofz"]},
    "scipy.stats": {"gaussian_kde": _SPECIAL, "mode": _SPECIAL},
    "scipy.linalg": {n: _SCHUR for n in ["funm", "hessenberg", "rsf2csf", "schur",
                                         "solve_sylvester", "sqrtm"]},
    "example_libraries.optimizers": {n: _HELPER for n in [
        "jax", "map", "partial", "safe_map", "safe_zip", "unzip2", "zip"]},
}

NAMESPACES = ["numpy", "numpy.linalg", "numpy.fft", "lax", "lax.linalg", "nn", "nn.initializers",
              "random", "tree", "tree_util", "image", "scipy.special", "scipy.stats",
              "scipy.linalg", "scipy.optimize", "scipy.sparse.linalg", "scipy.ndimage",
              "scipy.integrate", "scipy.interpolate", "scipy.cluster.vq", "scipy.spatial.transform",
              "example_libraries.stax", "example_libraries.optimizers"]


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_public_name_exists(namespace):
    theirs = importlib.import_module(f"jax.{namespace}")
    ours = importlib.import_module(f"fluxion.{namespace}")
    allowed = NOT_PROVIDED.get(namespace, {})
    missing = sorted(_public(theirs) - _public(ours) - set(allowed))
    assert not missing, f"fluxion.{namespace} lacks {len(missing)}: {missing}"
    stale = sorted(set(allowed) & _public(ours))
    assert not stale, f"listed as not provided but present: {stale}"
