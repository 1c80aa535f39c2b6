/* infer.c: one decoding step of a small transformer in a single C file, written the way
 * single-file LLM inference programs are: float buffers, int sizes, OpenMP on the matrix
 * products, and a main that times the steps and prints tokens per second. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
#if defined _WIN32
    #include "win.h"
#else
    #include <unistd.h>
#endif

typedef struct {
    int dim, hidden, vocab;
} Config;

void rmsnorm(float* o, float* x, float* weight, int size) {
    float ss = 0.0f;
    for (int j = 0; j < size; j++) {
        ss += x[j] * x[j];
    }
    ss /= size;
    ss += 1e-5f;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < size; j++) {
        o[j] = weight[j] * (ss * x[j]);
    }
}

void softmax(float* x, int size) {
    float max_val = x[0];
    for (int i = 1; i < size; i++) {
        if (x[i] > max_val) {
            max_val = x[i];
        }
    }
    float sum = 0.0f;
    for (int i = 0; i < size; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (int i = 0; i < size; i++) {
        x[i] /= sum;
    }
}

void matvec(float* xout, float* x, float* w, int n, int d) {
    // W (d,n) @ x (n,) -> xout (d,)
    int i;
    #pragma omp parallel for private(i)
    for (i = 0; i < d; i++) {
        float val = 0.0f;
        for (int j = 0; j < n; j++) {
            val += w[i * n + j] * x[j];
        }
        xout[i] = val;
    }
}

void swiglu(float* hb, float* hb2, int hidden_dim) {
    for (int i = 0; i < hidden_dim; i++) {
        float val = hb[i];
        val *= (1.0f / (1.0f + expf(-val)));
        val *= hb2[i];
        hb[i] = val;
    }
}

static long time_in_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static float frand(unsigned long long* s) {
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return ((*s * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f - 0.5f;
}

int main(int argc, char* argv[]) {
    Config c = {512, 1376, 4096};
    int steps = argc > 1 ? atoi(argv[1]) : 8;
    unsigned long long seed = 42;
    float* x = malloc(c.dim * sizeof(float)), *xb = malloc(c.dim * sizeof(float));
    float* rms = malloc(c.dim * sizeof(float));
    float* w1 = malloc((size_t)c.hidden * c.dim * sizeof(float));
    float* w3 = malloc((size_t)c.hidden * c.dim * sizeof(float));
    float* w2 = malloc((size_t)c.dim * c.hidden * sizeof(float));
    float* wcls = malloc((size_t)c.vocab * c.dim * sizeof(float));
    float* hb = malloc(c.hidden * sizeof(float)), *hb2 = malloc(c.hidden * sizeof(float));
    float* logits = malloc(c.vocab * sizeof(float));
    for (int i = 0; i < c.dim; i++) { x[i] = frand(&seed); rms[i] = 1.0f + 0.1f * frand(&seed); }
    for (long i = 0; i < (long)c.hidden * c.dim; i++) { w1[i] = 0.05f * frand(&seed); w3[i] = 0.05f * frand(&seed); w2[i] = 0.05f * frand(&seed); }
    for (long i = 0; i < (long)c.vocab * c.dim; i++) wcls[i] = 0.05f * frand(&seed);
    long start = time_in_ms();
    for (int s = 0; s < steps; s++) {
        rmsnorm(xb, x, rms, c.dim);
        matvec(hb, xb, w1, c.dim, c.hidden);
        matvec(hb2, xb, w3, c.dim, c.hidden);
        swiglu(hb, hb2, c.hidden);
        matvec(xb, hb, w2, c.hidden, c.dim);
        for (int i = 0; i < c.dim; i++) x[i] += xb[i];
        matvec(logits, x, wcls, c.dim, c.vocab);
        softmax(logits, c.vocab);
    }
    long end = time_in_ms();
    double sum = 0;
    for (int i = 0; i < c.vocab; i++) sum += logits[i] * (i % 11);
    printf("checksum: %.9e\n", sum);
    for (int i = 0; i < c.dim; i += c.dim / 8) printf("x[%d] = %.9e\n", i, x[i]);
    fprintf(stderr, "achieved tok/s: %f\n", steps / ((double)(end - start) / 1000));
    return 0;
}
