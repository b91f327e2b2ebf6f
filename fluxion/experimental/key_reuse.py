"""Key reuse checking (`jax.experimental.key_reuse`).

As in JAX, this module holds no functions: it documents the checker. Turn it on globally
with ``fluxion.config.update('jax_debug_key_reuse', True)`` or in a block with the
`fluxion.debug_key_reuse` context manager; then consuming a random key twice (eagerly, or
by passing a consumed key to a jitted function) raises `fluxion.errors.KeyReuseError`::

    >>> with fluxion.debug_key_reuse(True):
    ...     key = fluxion.random.key(0)
    ...     a = fluxion.random.normal(key)
    ...     b = fluxion.random.normal(key)  # raises KeyReuseError

Consumption is followed through transformations as JAX's jaxpr analysis does: a key used
in any `cond` branch is consumed after the cond, a loop body may not consume a key it
closes over, and ``keys[i]`` consumes one element of a key array.

Split keys (`fluxion.random.split`) to get fresh ones.
"""
