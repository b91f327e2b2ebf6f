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

from fluxion._src.numpy.eager import compile_eagerly as _compile_eagerly  # noqa: E402

# Outside jit each function runs as one cached executable per signature, as JAX jits them
# (get_scaled_dot_general_config makes a config, not arrays).
_compile_eagerly(globals(), names=[n for n in dir() if not n.startswith("_")
                                   and n != "get_scaled_dot_general_config"],
                 static_parameters=frozenset({
    "axis", "keepdims", "return_sign", "approximate", "num_classes", "dtype", "algorithm",
    "is_causal", "scale", "local_window_size", "implementation", "return_residual",
    "dimension_numbers", "preferred_element_type", "configs", "mode"}))
