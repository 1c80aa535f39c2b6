/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: stencil5_border
    grid: ["ceil_div(max(ny, nx), BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [u, v, ny, nx]
  - kernel: stencil5
    grid: ["ceil_div(ny*nx, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [u, v, c0, c1, ny, nx]
*/
// Naive CUDA baseline, ported from column-major code: a kernel per pass (the
// border copy, then the interior), the flat thread index walking the grid
// down columns (i fastest), so neighbouring threads touch addresses nx apart.
#define U(i, j) u[(i) * nx + (j)]
#define V(i, j) v[(i) * nx + (j)]

extern "C" __global__ void stencil5_border(const float* u, float* v, long long ny,
                                           long long nx) {
    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nx) {
        V(0, k) = U(0, k);
        V(ny - 1, k) = U(ny - 1, k);
    }
    if (k < ny) {
        V(k, 0) = U(k, 0);
        V(k, nx - 1) = U(k, nx - 1);
    }
}

extern "C" __global__ void stencil5(const float* u, float* v, float c0, float c1, long long ny,
                                    long long nx) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= ny * nx) return;
    long long i = idx % ny;
    long long j = idx / ny;
    if (i == 0 || j == 0 || i == ny - 1 || j == nx - 1) return;
    V(i, j) = c0 * U(i, j) + c1 * (U(i - 1, j) + U(i + 1, j) + U(i, j - 1) + U(i, j + 1));
}
