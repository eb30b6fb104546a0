"""Fast torch and Triton implementations of the reference operations, paired with them by name.

Each operation has a torch-vectorized version (``naive.py``, eager float32, readable) beside its Triton kernels;
both are reached through one public function per operation and checked against ``reference/``.
"""
