"""Testing helpers (`fluxion.test_util`)."""
from fluxion._src.test_util import check_grads, check_jvp, check_vjp  # noqa: F401
