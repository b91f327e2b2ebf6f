"""scipy.spatial.transform Rotation and Slerp against SciPy."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation as SR, Slerp as SSlerp

import fluxion
from fluxion.scipy.spatial.transform import Rotation, Slerp

RNG = np.random.default_rng(0)
QUATS = RNG.standard_normal((6, 4))
QUATS /= np.linalg.norm(QUATS, axis=1, keepdims=True)
SEQS = ["xyz", "ZYX", "zxz", "XYX", "yzx", "YXY"]


def test_conversions_match_scipy(x64):
    ours, theirs = Rotation.from_quat(QUATS), SR.from_quat(QUATS)
    np.testing.assert_allclose(ours.as_matrix(), theirs.as_matrix(), atol=1e-12)
    np.testing.assert_allclose(ours.as_rotvec(), theirs.as_rotvec(), atol=1e-12)
    np.testing.assert_allclose(ours.as_rotvec(degrees=True), theirs.as_rotvec(degrees=True),
                               atol=1e-9)
    np.testing.assert_allclose(ours.as_mrp(), theirs.as_mrp(), atol=1e-12)
    np.testing.assert_allclose(ours.magnitude(), theirs.magnitude(), atol=1e-12)
    np.testing.assert_allclose(ours.as_quat(canonical=True), theirs.as_quat(canonical=True),
                               atol=1e-12)
    np.testing.assert_allclose(ours.as_quat(scalar_first=True),
                               theirs.as_quat(scalar_first=True), atol=1e-12)
    for seq in SEQS:
        np.testing.assert_allclose(ours.as_euler(seq), theirs.as_euler(seq), atol=1e-10)


def test_constructors_match_scipy(x64):
    m = SR.from_quat(QUATS).as_matrix()
    np.testing.assert_allclose(Rotation.from_matrix(m).as_matrix(), m, atol=1e-12)
    rv = RNG.standard_normal((5, 3))
    np.testing.assert_allclose(Rotation.from_rotvec(rv).as_quat(), SR.from_rotvec(rv).as_quat(),
                               atol=1e-12)
    np.testing.assert_allclose(Rotation.from_rotvec(rv * 1e-5).as_quat(),
                               SR.from_rotvec(rv * 1e-5).as_quat(), atol=1e-12)
    np.testing.assert_allclose(Rotation.from_mrp(rv * 0.3).as_matrix(),
                               SR.from_mrp(rv * 0.3).as_matrix(), atol=1e-12)
    for seq in SEQS + ["x", "YZ"]:
        angles = RNG.uniform(-3, 3, (4, len(seq)))
        np.testing.assert_allclose(Rotation.from_euler(seq, angles).as_matrix(),
                                   SR.from_euler(seq, angles).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(Rotation.from_euler("xyz", [90, 0, 45], degrees=True).as_quat(),
                               SR.from_euler("xyz", [90, 0, 45], degrees=True).as_quat(),
                               atol=1e-12)


def test_composition_application_inverse_and_indexing(x64):
    a, b = Rotation.from_quat(QUATS), Rotation.from_quat(QUATS[::-1])
    sa, sb = SR.from_quat(QUATS), SR.from_quat(QUATS[::-1])
    np.testing.assert_allclose((a * b).as_matrix(), (sa * sb).as_matrix(), atol=1e-12)
    v = RNG.standard_normal((6, 3))
    np.testing.assert_allclose(a.apply(v), sa.apply(v), atol=1e-12)
    np.testing.assert_allclose(a.apply(v, inverse=True), sa.apply(v, inverse=True), atol=1e-12)
    np.testing.assert_allclose(a.inv().as_matrix(), sa.inv().as_matrix(), atol=1e-12)
    assert len(a) == 6 and a[2:4].quat.shape == (2, 4) and a[0].single
    with pytest.raises(TypeError, match="not subscriptable"):
        a[0][0]
    np.testing.assert_allclose(Rotation.concatenate([a[:2], a[2]]).quat, QUATS[:3], atol=1e-12)
    np.testing.assert_allclose(Rotation.identity().as_matrix(), np.eye(3))
    # A Rotation is a pytree: it goes through jit and vmap.
    f = fluxion.jit(lambda r, v: r.apply(v))
    np.testing.assert_allclose(f(a, v), sa.apply(v), atol=1e-12)


def test_slerp_matches_scipy(x64):
    times = np.array([0.0, 1.0, 2.5, 4.0])
    keys = SR.from_quat(QUATS[:4])
    ours = Slerp.init(times, Rotation.from_quat(QUATS[:4]))
    theirs = SSlerp(times, keys)
    query = np.array([0.0, 0.3, 1.0, 2.0, 3.9, 4.0])
    np.testing.assert_allclose(ours(query).as_matrix(), theirs(query).as_matrix(), atol=1e-10)
    np.testing.assert_allclose(ours(1.7).as_matrix(), theirs(1.7).as_matrix(), atol=1e-10)
    with pytest.raises(ValueError, match="at least 2"):
        Slerp.init([0.0], Rotation.from_quat(QUATS[:1]))


def test_errors():
    with pytest.raises(ValueError, match="consecutive axes"):
        Rotation.from_euler("xxy", [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Expected 3 axes"):
        Rotation.from_quat(QUATS).as_euler("xy")
    with pytest.raises(ValueError, match="from `seq`"):
        Rotation.from_euler("xYz", [1.0, 2.0, 3.0])


def test_mean_matches_jax():
    from jax.scipy.spatial.transform import Rotation as JR
    from fluxion.scipy.spatial.transform import Rotation as FR
    q = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w = np.array([1.0, 2.0, 0.5, 0.0, 3.0], np.float32)
    for kw in ({}, {"weights": w}):
        got, want = FR.from_quat(q).mean(**kw), JR.from_quat(q).mean(**kw)
        assert got.single and got.quat.dtype == want.quat.dtype
        np.testing.assert_allclose(got.as_matrix(), want.as_matrix(), atol=1e-5)
    with pytest.raises(TypeError):
        FR.from_quat(q[0]).mean()
    with pytest.raises(ValueError):
        FR.from_quat(q).mean(weights=w[:3])
