"""``python -m llama_cpp.server`` without ggml's extra weight buffers (llama.cpp's
``--no-repack``, which llama-cpp-python's server has no option for).

A llama-cpp-python built for the build machine's own CPU (its default) uses ggml's AMX
kernels on CPUs that report AMX; on some virtual machines they crash at the first token
(a segmentation fault in ``ggml_backend_amx_mul_mat``). Weights kept in plain CPU
buffers never reach those kernels. The real-model tier starts the server through this
module when ``FLOWLOOM_TEST_REAL_MODEL_NO_REPACK=1``; its arguments are the server's own.
"""

from __future__ import annotations

import sys


def main() -> None:
    import llama_cpp
    import llama_cpp.llama as llama_module

    defaults = llama_cpp.llama_model_default_params

    def without_extra_buffers() -> llama_cpp.llama_model_params:
        params = defaults()
        params.use_extra_bufts = False
        return params

    llama_cpp.llama_model_default_params = without_extra_buffers
    llama_module.llama_cpp.llama_model_default_params = without_extra_buffers
    from llama_cpp.server.__main__ import main as serve

    sys.argv[0] = "llama_cpp.server"
    serve()


if __name__ == "__main__":
    main()
