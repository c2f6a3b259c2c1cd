"""Facts of the number formats the kernels read and write (IEEE 754 binary16, bfloat16)."""

UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}  # half an ulp, relative
SMALLEST_SUBNORMAL = {"float16": 2.0**-24, "bfloat16": 2.0**-133}
