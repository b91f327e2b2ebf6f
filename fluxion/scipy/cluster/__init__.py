"""Clustering (`jax.scipy.cluster`)."""
from fluxion.scipy.cluster import vq  # noqa: F401
