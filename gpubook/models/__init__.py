"""What the book computes about kernels without running them: the roofline, schedules, layouts, the FA4 and
GEMM models, the low-precision formats, and their figures. Imports run, compile and facts."""
