"""Compiled executables as bytes (`jax.experimental.serialize_executable`)."""
from fluxion._src.serialize_executable import deserialize_and_load, serialize  # noqa: F401

__all__ = ["deserialize_and_load", "serialize"]
