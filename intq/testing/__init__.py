"""Reference architectures and data for intq's tests, benchmarks and demos (no downloads)."""
