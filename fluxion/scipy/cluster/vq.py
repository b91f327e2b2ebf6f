"""Vector quantization (`jax.scipy.cluster.vq`)."""
from fluxion._src.scipy.small import vq  # noqa: F401
