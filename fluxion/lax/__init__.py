"""fluxion.lax: the primitive operations, with XLA's semantics and no implicit promotion."""
from fluxion._src.lax.lax import *  # noqa: F401,F403
from fluxion._src.lax.lax import _convert_element_type  # noqa: F401
from fluxion._src.lax.contractions import Precision  # noqa: F401
from fluxion._src.lax.elementwise import RoundingMethod  # noqa: F401
from fluxion._src.lax.structural import *  # noqa: F401,F403
from fluxion._src.lax.indexing import *  # noqa: F401,F403
from fluxion._src.lax.convolution import *  # noqa: F401,F403
from fluxion._src.lax.windowed import *  # noqa: F401,F403
from fluxion._src.lax.sorting import *  # noqa: F401,F403
from fluxion._src.lax.stop_gradient import *  # noqa: F401,F403
from fluxion._src.lax.control_flow import *  # noqa: F401,F403
from fluxion._src.lax.parallel import *  # noqa: F401,F403
from fluxion._src.lax.fft import *  # noqa: F401,F403
from fluxion._src.lax.jax_names import *  # noqa: F401,F403
from fluxion._src.lax.special import *  # noqa: F401,F403
from fluxion._src.lax.jax_names_ops import *  # noqa: F401,F403

# lax.linalg on LAPACK (issue 10 item 2)
from fluxion.lax import linalg  # noqa: F401,E402
from fluxion._src.lax.device_put import device_put_p  # noqa: F401,E402
from fluxion._src.tokens import (  # noqa: F401,E402
    after_all, after_all_p, create_token, create_token_p)
from fluxion._src.sharded_jit import with_sharding_constraint, sharding_constraint_p  # noqa: F401,E402
from fluxion._src.lax.parallel import pswapaxes  # noqa: F401,E402
from fluxion._src.lax.point_to_point import psend, precv  # noqa: F401,E402
from fluxion._src.lax.ragged_collectives import ragged_all_to_all, ragged_all_to_all_p  # noqa: F401,E402
