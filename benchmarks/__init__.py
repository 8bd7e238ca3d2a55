# SPDX-License-Identifier: Apache-2.0
"""The benchmarks and the evaluation harness (`benchmarks.harness`); not part of the package. A regular package, so
`benchmarks.harness` resolves to this checkout's folder even when another distribution installs a top-level
`benchmarks` (pysbd does)."""
