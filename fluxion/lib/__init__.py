"""`jax.lib`: empty in the JAX release fluxion follows (its `xla_bridge` and `xla_client`
were removed); kept so `import jax.lib` keeps working."""
