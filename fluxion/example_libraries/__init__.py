"""Small example libraries (`jax.example_libraries`): `stax` layers and `optimizers`."""
