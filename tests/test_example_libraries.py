"""stax and optimizers give what jax.example_libraries gives for the same keys and data."""
import jax
import jax.example_libraries.optimizers as jopt
import jax.example_libraries.stax as jstax
import numpy as np
import pytest

import fluxion
import fluxion.example_libraries.optimizers as opt
import fluxion.example_libraries.stax as stax


def _net(s):
    return s.serial(
        s.Conv(4, (3, 3), padding="SAME"), s.BatchNorm(), s.Relu,
        s.MaxPool((2, 2), strides=(2, 2)),
        s.Conv(6, (2, 2), strides=(1, 1)), s.Tanh, s.AvgPool((2, 2), padding="SAME"),
        s.SumPool((1, 2)), s.Flatten,
        s.FanOut(2), s.parallel(s.Dense(5), s.Dense(5)), s.FanInSum,
        s.Dense(3), s.Gelu, s.Dense(4), s.LogSoftmax)


X = np.random.default_rng(0).standard_normal((2, 8, 8, 1)).astype(np.float32)


def test_every_name_exists():
    for ours, theirs in [(stax, jstax), (opt, jopt)]:
        public = {n for n in dir(theirs) if not n.startswith("_")}
        helpers = {"functools", "math", "jnp", "lax", "random", "jax", "annotations", "Any",
                   "Callable", "NamedTuple", "namedtuple", "partial", "safe_map", "safe_zip",
                   "unzip2", "map", "zip"}
        assert not public - helpers - set(dir(ours))


def test_stax_network_params_and_outputs_equal_jax():
    init, apply = _net(stax)
    jinit, japply = _net(jstax)
    shape, params = init(fluxion.random.PRNGKey(1), X.shape)
    jshape, jparams = jinit(jax.random.PRNGKey(1), X.shape)
    assert tuple(shape) == tuple(jshape)
    for a, b in zip(fluxion.tree.leaves(params), jax.tree.leaves(jparams)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(apply(params, X), japply(jparams, X), rtol=1e-5, atol=1e-5)


def test_dropout_conv_transpose_and_fanin_concat():
    layers = lambda s: s.serial(s.ConvTranspose(3, (2, 2), strides=(2, 2)), s.Elu,
                                s.FanOut(2), s.parallel(s.Identity, s.Softplus),
                                s.FanInConcat(), s.Dropout(0.7))
    init, apply = layers(stax)
    jinit, japply = layers(jstax)
    shape, params = init(fluxion.random.PRNGKey(2), X.shape)
    jshape, jparams = jinit(jax.random.PRNGKey(2), X.shape)
    assert tuple(shape) == tuple(jshape)
    got = apply(params, X, rng=fluxion.random.PRNGKey(3))
    want = japply(jparams, X, rng=jax.random.PRNGKey(3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key"):
        apply(params, X)


OPTIMIZERS = [("sgd", (0.1,)), ("momentum", (0.1, 0.9)), ("nesterov", (0.1, 0.9)),
              ("adagrad", (0.1,)), ("rmsprop", (0.01,)), ("rmsprop_momentum", (0.01,)),
              ("adam", (0.01,)), ("adamax", (0.01,)), ("sm3", (0.1,))]


@pytest.mark.parametrize("name,args", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_optimizer_trajectories_equal_jax(name, args):
    def run(o, framework):
        init, update, get_params = getattr(o, name)(*args)
        params = {"w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
                  "b": np.float32(0.5)}
        loss = lambda p: framework.numpy.sum((p["w"] - 0.3) ** 2) + p["b"] ** 2
        state = init(params)
        for i in range(4):
            g = framework.grad(loss)(get_params(state))
            state = framework.jit(update)(i, g, state)
        return get_params(state)
    ours, theirs = run(opt, fluxion), run(jopt, jax)
    for key in ("w", "b"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=2e-6, atol=1e-7)


def test_schedules_utilities_and_state_packing():
    for sched in [opt.exponential_decay(0.1, 10, 0.5), opt.inverse_time_decay(0.1, 5, 2.0, True),
                  opt.polynomial_decay(1.0, 8, 0.1, 2.0),
                  opt.piecewise_constant([3, 6], [1.0, 0.5, 0.1])]:
        name = sched.__qualname__.split(".")[0]
        jsched = {"exponential_decay": jopt.exponential_decay(0.1, 10, 0.5),
                  "inverse_time_decay": jopt.inverse_time_decay(0.1, 5, 2.0, True),
                  "polynomial_decay": jopt.polynomial_decay(1.0, 8, 0.1, 2.0),
                  "piecewise_constant": jopt.piecewise_constant([3, 6], [1.0, 0.5, 0.1])}[name]
        for i in [0, 3, 4, 9]:
            np.testing.assert_allclose(np.asarray(sched(i)), np.asarray(jsched(i)), rtol=1e-6)
    grads = {"a": np.ones(3, np.float32) * 3, "b": np.ones(2, np.float32) * 4}
    clipped = opt.clip_grads(grads, 1.0)
    np.testing.assert_allclose(float(opt.l2_norm(clipped)), 1.0, rtol=1e-6)
    init, update, get_params = opt.adam(0.1)
    state = init(grads)
    packed = opt.pack_optimizer_state(opt.unpack_optimizer_state(state))
    assert fluxion.tree.structure(packed) == fluxion.tree.structure(state)
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        update(0, {"a": grads["a"]}, state)
