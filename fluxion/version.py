"""Version information (`jax.version`).

`__version__` is fluxion's own version; `jax_api_version` the JAX release whose API fluxion
follows (its tests compare against that JAX).
"""
_version = "0.1.0"
__version__ = _version
jax_api_version = "0.10.2"


def _version_as_tuple(version_str: str) -> tuple:
    return tuple(int(i) for i in version_str.split(".") if i.isdigit())


__version_info__ = _version_as_tuple(__version__)
