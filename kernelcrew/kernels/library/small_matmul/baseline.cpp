/* kernelcrew
entry: small_matmul
flags: [-O2]
*/
#include <cstdint>

// Naive CPU baseline: textbook i-j-k triple loop for every matrix in the batch,
// k innermost, so b is read with stride n.
extern "C" void small_matmul(const float* a, const float* b, float* c,
                             int64_t batch, int64_t m, int64_t k, int64_t n) {
    for (int64_t p = 0; p < batch; ++p) {
        const float* ap = a + p * m * k;
        const float* bp = b + p * k * n;
        float* cp = c + p * m * n;
        for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
                float acc = 0.0f;
                for (int64_t q = 0; q < k; ++q) {
                    acc += ap[i * k + q] * bp[q * n + j];
                }
                cp[i * n + j] = acc;
            }
        }
    }
}
