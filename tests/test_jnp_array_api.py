"""The Array API surface of fluxion.numpy compared with jax.numpy's, attribute by attribute."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fluxion
import fluxion.numpy as fnp

from _jnp_oracle_a import agree, both_x64

# The names of this part of issue 10 (set operations, statistics, searching, calculus,
# polynomials, windows, Array API): each exists in fluxion.numpy.
NAMES = """unique unique_all unique_counts unique_inverse unique_values union1d intersect1d
setdiff1d setxor1d isin median quantile percentile nanmedian nanquantile nanpercentile nanvar
nanstd nanargmax nanargmin cov corrcoef histogram histogram2d histogramdd histogram_bin_edges
bincount digitize searchsorted lexsort partition argpartition sort_complex argwhere flatnonzero
extract compress select piecewise choose diff ediff1d gradient trapezoid interp convolve
correlate unwrap cross poly polyadd polysub polymul polydiv polyder polyint polyval polyfit roots
bartlett blackman hamming hanning kaiser isdtype astype __array_namespace_info__
__array_api_version__""".split()


def test_names_exist_with_jax_parameters():
    import inspect
    for name in NAMES:
        assert hasattr(fnp, name), name
        ours, theirs = getattr(fnp, name), getattr(jnp, name)
        if callable(theirs):
            expected = [p for p in inspect.signature(theirs).parameters
                        if p != "out_sharding"]
            actual = [p for p in inspect.signature(ours).parameters if p != "out_sharding"]
            assert actual == expected, (name, actual, expected)


def test_array_api_version_and_namespace():
    assert fnp.__array_api_version__ == jnp.__array_api_version__
    x = fnp.ones(3)
    assert x.__array_namespace__() is fnp
    assert x.__array_namespace__(api_version=fnp.__array_api_version__) is fnp
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="2021.12")
    assert fluxion.jit(lambda v: v * (v.__array_namespace__() is fnp))(x).tolist() == [1.] * 3


@pytest.mark.parametrize("x64", [False, True])
def test_namespace_info(x64):
    with both_x64(x64):
        ours, theirs = fnp.__array_namespace_info__(), jnp.__array_namespace_info__()
        assert ours.capabilities() == theirs.capabilities()
        assert ours.default_device() is theirs.default_device() is None
        assert ours.default_dtypes() == theirs.default_dtypes()
        assert ours.default_dtypes(device=None) == theirs.default_dtypes(device=None)
        for kind in (None, "bool", "signed integer", "unsigned integer", "integral",
                     "real floating", "complex floating", "numeric",
                     ("bool", "real floating")):
            assert ours.dtypes(kind=kind) == theirs.dtypes(kind=kind), kind
        with pytest.raises(KeyError):
            ours.dtypes(kind="foo")
    devices = ours.devices()
    assert devices[0] is None and devices[1:] == fluxion.devices()
    assert len(devices) == len(theirs.devices())


def test_device_to_device_and_mT():
    x = fnp.arange(6.0).reshape(2, 3)
    device = fluxion.devices()[0]
    assert x.device == device and x.devices() == {device}
    moved = x.to_device(device)
    np.testing.assert_array_equal(np.asarray(moved), np.asarray(x))
    assert fluxion.jit(lambda v: v.to_device(device) + 1)(x).shape == (2, 3)
    with pytest.raises(NotImplementedError):
        x.to_device(device, stream=1)
    assert x.mT.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(fnp.ones((4, 2, 3)).mT), np.ones((4, 3, 2)))
    with pytest.raises(ValueError):
        fnp.ones(3).mT


def test_isdtype_matches_jax():
    kinds = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
             "complex floating", "numeric", ("bool", "integral"), np.float32, (np.int8, "bool")]
    for dtype in (np.bool_, np.int8, np.uint32, np.float16, jnp.bfloat16, np.float32,
                  np.float64, np.complex64):
        for kind in kinds:
            assert fnp.isdtype(dtype, kind) == jnp.isdtype(dtype, kind), (dtype, kind)
    with pytest.raises(ValueError):
        fnp.isdtype(np.float32, "foo")


def test_astype_copy_device():
    x = np.arange(4, dtype=np.int32)
    agree("astype", x, np.float32)
    agree("astype", x, None)
    agree("astype", x, np.float32, copy=True)
    agree("astype", 3, np.float32)
    agree("astype", [1, 2], np.float32)
    agree("astype", x, np.int64, x64=True)
    out = fnp.astype(x, np.float32, device=fluxion.devices()[0])
    assert out.device == fluxion.devices()[0] and out.dtype == np.float32
