"""TIRx to PTX and cubin without a GPU: the toolchain, the build and its report, call signatures, and the
build-time helpers kernels use (bounded mbarrier waits, TMEM allocation). Imports facts only."""
