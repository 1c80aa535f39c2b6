/* kernelcrew
flags: [-O3]
launch:
  - kernel: sgemm_naive
    grid: ["ceil_div(n, 16)", "ceil_div(m, 16)"]
    block: [16, 16]
    args: [a, b, c, m, k, n]
*/
// op: sgemm. The textbook first CUDA matmul: a 2-D grid of 16 x 16 blocks, one output
// per thread, int coordinates, the guard on both.
extern "C" __global__ void sgemm_naive(const float* A, const float* B, float* C, long long M,
                                       long long K, long long N) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int i = 0; i < K; i++) {
            sum += A[row * K + i] * B[i * N + col];
        }
        C[row * N + col] = sum;
    }
}
