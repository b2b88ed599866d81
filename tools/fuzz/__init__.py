"""Differential fuzzer for the MLX EP: seeded small ONNX graphs built from the operator registry
(build/registry_dump --json), each run on ORT's CPU provider (the oracle) and on the EP in three
modes (compiled, shape-keyed compile, eager), in worker processes so that a crash or a hang is
counted and the run goes on. Entry point: tools/fuzz/run.py; `make fuzz`.

It lives under tools/ rather than tests/ because it is a program with its own CLI and output
folder, not a set of pytest tests; tests/ops/test_fuzz_slice.py imports it for a bounded CI
slice.
"""
