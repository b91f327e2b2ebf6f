"""`fluxion.experimental.layout` (as `jax.experimental.layout`)."""
from fluxion._src.layout import Format, Layout, with_layout_constraint  # noqa: F401
