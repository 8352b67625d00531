"""Layer 6, codegen: one printer over the plan IR, backends Triton, CUDA C++ and C/OpenMP — room for them.

May import: every layer up to plan and search.
"""
