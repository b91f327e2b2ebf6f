"""Functions with a custom dead-code-elimination rule (`jax.experimental.custom_dce`)."""
from fluxion._src.custom_dce import custom_dce  # noqa: F401
