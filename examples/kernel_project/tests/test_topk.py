from my_kernels.topk import topk

from csa.pytest_plugin import kernel_tests

test_topk = kernel_tests("topk", topk, convention="v4.1")
