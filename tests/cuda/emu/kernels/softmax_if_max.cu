/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: softmax_forward
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    args: [x, y, rows, cols]
*/
// op: softmax_rows. A row per thread; the maximum found with an if from -INFINITY, the
// exponentials stored and summed from the stored values, then scaled by the inverse.
extern "C" __global__ void softmax_forward(const float* inp, float* out, long long N,
                                           long long C) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < N) {
        const float* x = inp + i * C;
        float* y = out + i * C;
        float maxval = -INFINITY;
        for (long long j = 0; j < C; j++) {
            if (x[j] > maxval) maxval = x[j];
        }
        double sum = 0.0;
        for (long long j = 0; j < C; j++) {
            y[j] = expf(x[j] - maxval);
            sum += y[j];
        }
        float norm = 1.0f / (float)sum;
        for (long long j = 0; j < C; j++) {
            y[j] *= norm;
        }
    }
}
