"""lax.linalg on LAPACK."""
