"""The primitives of fluxion's own operations, by JAX's names (`jax.extend.core.primitives`),
for code that writes rules for them (a batching rule, a lowering for a new platform)."""
from fluxion.lax import (  # noqa: F401
    abs_p, acos_p, acosh_p, add_p, after_all_p, all_gather_p, all_to_all_p, and_p,
    approx_top_k_p, argmax_p, argmin_p, asin_p, asinh_p, atan2_p, atan_p, atanh_p,
    axis_index_p, bessel_i0e_p, bessel_i1e_p, bitcast_convert_type_p, broadcast_in_dim_p,
    cbrt_p, ceil_p, clamp_p, clz_p, complex_p, concatenate_p, cond_p, conj_p,
    conv_general_dilated_p, convert_element_type_p, copy_p, cos_p, cosh_p, create_token_p,
    cumlogsumexp_p, cummax_p, cummin_p, cumprod_p, cumsum_p, device_put_p, digamma_p, div_p,
    dot_general_p, dynamic_slice_p, dynamic_update_slice_p, eq_p, eq_to_p, erf_inv_p, erf_p,
    erfc_p, exp2_p, exp_p, expm1_p, fft_p, floor_p, gather_p, ge_p, gt_p, igamma_grad_a_p,
    igamma_p, igammac_p, imag_p, integer_pow_p, iota_p, is_finite_p, le_p, le_to_p, lgamma_p,
    linear_solve_p, log1p_p, log_p, logistic_p, lt_p, lt_to_p, max_p, min_p, mul_p, ne_p,
    neg_p, nextafter_p, not_p, or_p, pad_p, pmax_p, pmin_p, polygamma_p, population_count_p,
    pow_p, ppermute_p, psum_p, ragged_all_to_all_p, real_p, reduce_and_p, reduce_max_p,
    reduce_min_p, reduce_or_p, reduce_p, reduce_precision_p, reduce_prod_p, reduce_sum_p,
    reduce_window_max_p, reduce_window_min_p, reduce_window_p, reduce_window_sum_p,
    reduce_xor_p, regularized_incomplete_beta_p, rem_p, reshape_p, rev_p, rng_bit_generator_p,
    rng_uniform_p, round_p, rsqrt_p, scan_p, scatter_add_p, scatter_max_p, scatter_min_p,
    scatter_mul_p, scatter_p, select_and_gather_add_p, select_and_scatter_add_p,
    select_and_scatter_p, select_n_p, sharding_constraint_p, shift_left_p,
    shift_right_arithmetic_p, shift_right_logical_p, sign_p, sin_p, sinh_p, slice_p, sort_p,
    sqrt_p, square_p, squeeze_p, stop_gradient_p, sub_p, tan_p, tanh_p, top_k_p, transpose_p,
    while_p, xor_p, zeta_p)
from fluxion.lax.linalg import (  # noqa: F401
    cholesky_p, eig_p, eigh_p, hessenberg_p, householder_product_p, lu_p, qr_p, schur_p,
    svd_p, triangular_solve_p, tridiagonal_p, tridiagonal_solve_p)
from fluxion._src.api import (  # noqa: F401
    jit_p)
from fluxion._src.checkpoint import (  # noqa: F401
    name_p)
from fluxion._src.custom_derivatives import (  # noqa: F401
    custom_jvp_call_p, custom_lin_p, custom_vjp_call_p)
from fluxion._src.random.gamma import (  # noqa: F401
    random_gamma_p)
from fluxion._src.random.threefry import (  # noqa: F401
    threefry2x32_p)
from fluxion._src.state.discharge import (  # noqa: F401
    get_p, swap_p)

# JAX's names for primitives fluxion has under its own names.
from fluxion._src.ad import add_any_p as add_jaxvals_p  # noqa: F401,E402
from fluxion._src.checkpoint import checkpoint_p as remat_p  # noqa: F401,E402

# Not here: call_p and closed_call_p (fluxion inlines calls or stages them as `jit`), empty2_p,
# and the random_*_p primitives (fluxion's typed keys are pytrees over uint32 data, so
# seeding, splitting and folding are ordinary operations on that data).
