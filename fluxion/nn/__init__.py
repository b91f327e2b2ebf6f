"""Neural-network functions (`jax.nn`)."""
from fluxion._src.nn_functions import (relu, relu6, sigmoid, log_sigmoid, softplus, silu, swish,  # noqa: F401
                                       gelu, elu, leaky_relu, celu, selu, hard_tanh, logsumexp,
                                       log_softmax, softmax, one_hot, standardize)
