#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <cblas.h>
#define NC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NC_MAX(a, b) ((a) > (b) ? (a) : (b))

/* max and min that propagate NaN as numpy's do (C99's fmaxf and fminf drop it), as selects: libm's are calls
   in a vector loop.  A SoftMax's row max folds into an accumulator that starts at -inf (+inf) and may drop a
   NaN (the row's sum is NaN then anyway): one vmaxps (vminps). */
static inline float nc_fmax(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float nc_fmin(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float nc_fold_max(float acc, float v) { return v > acc ? v : acc; }
/* exp(x) = 2^n exp(r): n = round(x / ln 2) by the 1.5·2^23 trick (n lands in t's low bits, no float-to-int
   conversion), r = x - n ln 2 (Cody-Waite, two steps), 2 exp(r) a degree-6 near-minimax polynomial, and
   2^(n-1) built from t's bits.  At most 2 ulp from exp (checked by the tests); exactly 0 below -125 ln 2
   (2^-125: flushes the lowest binade of normals and the subnormals), +inf above ln FLT_MAX and for +inf,
   NaN for NaN.  Selects only, no call, no branch: an element loop of it vectorises (about 16 vector
   instructions for 16 floats on AVX-512). */
static inline float nc_exp(float x) {
    const float lo = -86.64339798f, hi = 88.72283935546875f;
    const float xc = hi < x ? hi : x;   /* NaN stays NaN */
    const float t = xc * 1.44269504088896341f + 12582912.0f;
    const float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 2.7673691511e-3f;
    p = p * r + 1.6749631613e-2f;
    p = p * r + 8.3336450160e-2f;
    p = p * r + 3.3332839608e-1f;
    p = p * r + 9.9999982119e-1f;
    p = p * r + 2.0f;
    p = p * r + 2.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits << 23) + 0x3F000000u;   /* 2^(n-1): n - 1 + 127 in the exponent field */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < lo ? 0.0f : p * scale;
}
static inline float nc_sigmoid(float x) { return 1.0f / (1.0f + nc_exp(-x)); }
static inline float nc_silu(float x) { return x / (1.0f + nc_exp(-x)); }
static inline float nc_gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
static void *nc_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) return NULL;
    return p;
}
#define NC_LANES 16
/* the lanes of a sum added as a tree (a vectorised sum's order, as clang and -ffast-math add them) */
static inline float nc_sum_lanes(float *l) {
    for (int w = NC_LANES / 2; w > 0; w /= 2)
        for (int k = 0; k < w; ++k) l[k] += l[k + w];
    return l[0];
}


static void nc_kernel0(const float *restrict x0, const float *restrict x1, float *restrict y0, int nc_threads) {
    #pragma omp parallel num_threads(nc_threads)
    {
        unsigned char *nc_arena = (unsigned char *)nc_alloc(320);   // level 1: 320 B, the plan's columns
        float *nc_stage = (float *)nc_alloc(1 * sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (long nc_b = 0; nc_b < 9; ++nc_b) {
            const int i_c = (int)(nc_b / 3);
            const int i_a = (int)(nc_b % 3);
            const int e_i_c = NC_MIN(4, 9 - 4*i_c);   // group c by 4
            const int e_i_a = NC_MIN(4, 10 - 4*i_a);   // group a by 4
            float *const sum0 = (float *)(nc_arena + 0);   // 4×4
            float *const x0_1 = (float *)(nc_arena + 64);   // 4×8
            float *const x1_1 = (float *)(nc_arena + 192);   // 8×4
            // kernel @1
            // head
            // sum0 ← 0
            for (int j_a = 0; j_a < e_i_a; ++j_a) {
                for (int j_c = 0; j_c < e_i_c; ++j_c) {
                    sum0[4*j_a + j_c] = 0.0f;
                }
            }
            for (int i_b = 0; i_b < 2; ++i_b) {   // stream b by 8
                const int e_i_b = NC_MIN(8, 12 - 8*i_b);
                // x0_1 ← load x0[g_a·i_a : +≤g_a, i_b·s_b : +≤s_b]
                for (int j_a = 0; j_a < e_i_a; ++j_a) {
                    for (int j_b = 0; j_b < e_i_b; ++j_b) {
                        x0_1[8*j_a + j_b] = x0[48*i_a + 8*i_b + 12*j_a + j_b];
                    }
                }
                // x1_1 ← load x1[i_b·s_b : +≤s_b, g_c·i_c : +≤g_c]
                for (int j_b = 0; j_b < e_i_b; ++j_b) {
                    for (int j_c = 0; j_c < e_i_c; ++j_c) {
                        x1_1[4*j_b + j_c] = x1[72*i_b + 4*i_c + 9*j_b + j_c];
                    }
                }
                // sum0 += ·(x0_1, x1_1)
                {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, e_i_a, e_i_c, e_i_b, 1.0f, x0_1 + 0, 8, x1_1 + 0, 4, 1.0f, sum0 + 0, 4);
                }
            }
            // tail
            // y0[g_a·i_a : +≤g_a, g_c·i_c : +≤g_c] ← store sum0
            for (int j_a = 0; j_a < NC_MIN(4, 10 - 4*i_a); ++j_a) {
                for (int j_c = 0; j_c < NC_MIN(4, 9 - 4*i_c); ++j_c) {
                    y0[36*i_a + 4*i_c + 9*j_a + j_c] = sum0[4*j_a + j_c];
                }
            }
        }
        free(nc_arena);
        free(nc_stage);
    }
}

void nc_run_in(const float *restrict x0, const float *restrict x1, float *restrict y0, int nc_threads) {   // the workspace given (the caller keeps it between runs: napkin_cat.codegen.c.workspace)
    openblas_set_num_threads(1);   /* parallel over the Grid, not inside a tile */
    nc_kernel0(x0, x1, y0, nc_threads);
}

void nc_run(const float *restrict x0, const float *restrict x1, float *restrict y0, int nc_threads) {
    nc_run_in(x0, x1, y0, nc_threads);
}
