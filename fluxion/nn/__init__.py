"""Neural-network functions (`jax.nn`)."""
from fluxion._src.nn_functions import (relu, relu6, sigmoid, log_sigmoid, softplus, silu, swish,  # noqa: F401
                                       gelu, elu, leaky_relu, celu, selu, hard_tanh, logsumexp,
                                       log_softmax, softmax, one_hot, standardize)
from fluxion._src.nn_activations import (identity, tanh, glu, hard_sigmoid, hard_silu,  # noqa: F401
                                         hard_swish, mish, soft_sign, squareplus, sparse_plus,
                                         sparse_sigmoid, log1mexp, logmeanexp,
                                         dot_product_attention)
from fluxion.nn import initializers  # noqa: F401,E402
from fluxion._src.nn_activations import (get_scaled_dot_general_config, scaled_dot_general,  # noqa: F401,E402
                                         scaled_matmul)
