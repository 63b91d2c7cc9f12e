"""Benchmarks and fault injection: one command each (`make bench`, `make chaos`)."""
