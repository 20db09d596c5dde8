"""tickwheel's benchmarks: ``python -m bench <b1|b2|b3|b4|b5|all>`` from the repository root
(bench/README.md). Not part of the test suite, and not part of the installed package."""
