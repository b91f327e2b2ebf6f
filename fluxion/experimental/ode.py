"""ODE integration (`jax.experimental.ode`)."""
from fluxion._src.ode import odeint  # noqa: F401
