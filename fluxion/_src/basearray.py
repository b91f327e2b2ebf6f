"""`fluxion.Array`, the type every fluxion array has: for isinstance checks and annotations.

Three kinds of values are fluxion arrays, as in JAX (`jax.Array`): concrete arrays in device
buffers (`fluxion._src.array.Array`), tracers standing for arrays while a function is
transformed (`fluxion.core.Tracer`), and typed PRNG key arrays. Library code that filters a
pytree with `isinstance(x, fluxion.Array)` therefore treats traced and concrete leaves alike;
`isinstance(x, fluxion.core.Tracer)` tells them apart.
"""
import abc


class Array(abc.ABC):
    """The abstract type of fluxion arrays, concrete or traced (JAX's `jax.Array`).

    Not instantiated: arrays come from `fluxion.numpy` functions, `fluxion.device_put` and
    transformations. Use it in `isinstance` checks and type annotations.
    """

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        raise TypeError("fluxion.Array cannot be instantiated; create arrays with "
                        "fluxion.numpy.asarray or fluxion.device_put.")


Array.__module__ = "fluxion"
