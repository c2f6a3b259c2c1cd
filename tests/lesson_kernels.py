"""A kernel that TIRx must refuse to lower: A's fragment copied into every lane of the warp."""

from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import R, S, TileLayout, laneid

M, N, K = 16, 8, 16
A_EVERY_LANE = TileLayout(S[(M, K) : (K, 1)] + R[32 : 1 @ laneid])
B_FRAG = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 2, 1 @ laneid, 1)])
D_FRAG = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid, 1)])


@T.prim_func
def gemm_mma_replicated_a(A: T.Buffer((M, K), "float16"), B: T.Buffer((N, K), "float16"),
                          D: T.Buffer((M, N), "float32")):
    T.device_entry()
    _warp = T.warp_id([1])
    _lane = T.lane_id([32])
    a = T.alloc_buffer((M, K), "float16", scope="local", layout=A_EVERY_LANE)
    b = T.alloc_buffer((N, K), "float16", scope="local", layout=B_FRAG)
    d = T.alloc_buffer((M, N), "float32", scope="local", layout=D_FRAG)
    Tx.warp.copy(a[:, :], A[:, :])
    Tx.warp.copy(b[:, :], B[:, :])
    Tx.warp.gemm(d, a, b, d, transpose_A=False, transpose_B=True, alpha=1.0, beta=0.0,
                 dispatch="mma.m16n8k*")
    Tx.warp.copy(D[:, :], d[:, :])
