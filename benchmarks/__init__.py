"""fluxion-vs-JAX benchmarks; run `python benchmarks/run.py --help`."""
