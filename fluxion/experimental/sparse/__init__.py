"""Sparse arrays (`jax.experimental.sparse`): BCOO and BCSR, the unbatched COO/CSR/CSC
matrices, and their operations. Each name is listed once, in the submodule JAX keeps it in;
the package re-exports every submodule's public names."""
from fluxion._src.sparse.bcoo import (  # noqa: F401
    CuSparseEfficiencyWarning as CuSparseEfficiencyWarning,
    JAXSparse as JAXSparse,
    SparseEfficiencyError as SparseEfficiencyError,
    SparseEfficiencyWarning as SparseEfficiencyWarning,
)
from fluxion.experimental.sparse.ad import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.api import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.bcoo import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.bcsr import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.coo import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.csr import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.random import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse.transform import *  # noqa: F401,F403,E402
from fluxion.experimental.sparse import (  # noqa: F401,E402
    ad, api, bcoo, bcsr, coo, csr, linalg, random, transform)
