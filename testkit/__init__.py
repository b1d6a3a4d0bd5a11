"""What the tests and the benchmarks share: protocol peers, a local Hub, the launched app, realistic records."""
