/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: cumsum_rows_fast
    grid: [rows]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, rows, cols]
*/
// Hand-optimized CUDA version: one block per row, walking it in chunks of
// 4 * BLOCK elements. Each thread loads 4 consecutive elements (one float4 when
// the row is 16-byte aligned) and scans them in registers; the threads' totals
// are scanned with warp shuffles, the warps' totals in shared memory, and the
// carry from the earlier chunks is added. Reads and writes are coalesced; the
// row is read once. BLOCK: a multiple of 32, at most 1024.

__device__ __forceinline__ float kc_warp_scan(float s, int lane) {
    for (int o = 1; o < 32; o <<= 1) {
        const float n = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += n;
    }
    return s;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
cumsum_rows_fast(const float* __restrict__ x, float* __restrict__ y, long long rows,
                 long long cols) {
    __shared__ float warp_tot[BLOCK / 32];
    const long long r = blockIdx.x;
    if (r >= rows) return;
    const float* __restrict__ xr = x + r * cols;
    float* __restrict__ yr = y + r * cols;
    const bool vec = (cols & 3) == 0 && ((reinterpret_cast<unsigned long long>(xr) |
                                          reinterpret_cast<unsigned long long>(yr)) & 15ull) == 0;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float carry = 0.0f;
    for (long long base = 0; base < cols; base += 4 * BLOCK) {
        const long long j = base + 4 * threadIdx.x;
        float v0 = 0.0f, v1 = 0.0f, v2 = 0.0f, v3 = 0.0f;
        if (vec) {  // cols % 4 == 0: a group is all in the row or all past it
            if (j < cols) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(xr + j));
                v0 = a.x;
                v1 = a.y;
                v2 = a.z;
                v3 = a.w;
            }
        } else {
            if (j < cols) v0 = __ldg(xr + j);
            if (j + 1 < cols) v1 = __ldg(xr + j + 1);
            if (j + 2 < cols) v2 = __ldg(xr + j + 2);
            if (j + 3 < cols) v3 = __ldg(xr + j + 3);
        }
        v1 += v0;
        v2 += v1;
        v3 += v2;
        const float s = kc_warp_scan(v3, lane);
        if (lane == 31) warp_tot[warp] = s;
        __syncthreads();
        if (warp == 0) {
            float w = lane < BLOCK / 32 ? warp_tot[lane] : 0.0f;
            w = kc_warp_scan(w, lane);
            if (lane < BLOCK / 32) warp_tot[lane] = w;
        }
        __syncthreads();
        const float off = carry + (s - v3) + (warp > 0 ? warp_tot[warp - 1] : 0.0f);
        if (vec) {
            if (j < cols)
                *reinterpret_cast<float4*>(yr + j) =
                    make_float4(v0 + off, v1 + off, v2 + off, v3 + off);
        } else {
            if (j < cols) yr[j] = v0 + off;
            if (j + 1 < cols) yr[j + 1] = v1 + off;
            if (j + 2 < cols) yr[j + 2] = v2 + off;
            if (j + 3 < cols) yr[j + 3] = v3 + off;
        }
        carry += warp_tot[BLOCK / 32 - 1];
        __syncthreads();  // every thread has read warp_tot before the next chunk writes it
    }
}
