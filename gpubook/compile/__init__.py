"""TIRx to PTX and cubin without a GPU: the toolchain, the build and its report, call signatures, and the
build-time helpers kernels use (bounded mbarrier waits, TMEM allocation), and the PTX lint every
asynchronous build runs (`lint`, on `ptxflow`'s control-flow graph). Imports facts only."""
