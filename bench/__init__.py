"""Side-by-side benchmarks: every row is measured in the same run, on the same machine."""
