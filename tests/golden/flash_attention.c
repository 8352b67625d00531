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


static void nc_kernel0(const float *restrict x0, const float *restrict x1, const float *restrict x2, float *restrict y0, int nc_threads) {
    #pragma omp parallel num_threads(nc_threads)
    {
        unsigned char *nc_arena = (unsigned char *)nc_alloc(8448);   // level 1: 8448 B, the plan's columns
        float *nc_stage = (float *)nc_alloc(1 * sizeof(float));
        float *nc_rows = (float *)nc_alloc(64 * sizeof(float));   // per-row scalars of a SoftMax in passes
        #pragma omp for schedule(dynamic, 1)
        for (long nc_b = 0; nc_b < 4; ++nc_b) {
            const int i_q = (int)(nc_b);
            const int e_i_q = NC_MIN(32, 100 - 32*i_q);   // group q by 32
            const float *x0_1;   // 32×16, a view of x0
            float *const mu0 = (float *)(nc_arena + 2048);   // 32
            float *const z0 = (float *)(nc_arena + 2176);   // 32
            float *const o0 = (float *)(nc_arena + 2304);   // 32×16
            const float *x1_1;   // 16×16, a view of x1
            const float *x2_1;   // 16×16, a view of x2
            float *const contract10 = (float *)(nc_arena + 6400);   // 32×16
            float *const softmax_unscaled11_0 = (float *)(nc_arena + 6400);   // 32×16
            float *const softmax_unscaled12_2 = (float *)(nc_arena + 4352);   // 32
            float *const div13 = (float *)(nc_arena + 2304);   // 32×16
            // kernel @1
            // head
            x0_1 = x0 + 512*i_q;   // x0_1 ← view of x0[g_q·i_q : +≤g_q, :] (the cache loads it)
            // mu0 ← -inf
            for (int j_q = 0; j_q < e_i_q; ++j_q) {
                mu0[j_q] = -INFINITY;
            }
            // z0 ← 0
            for (int j_q = 0; j_q < e_i_q; ++j_q) {
                z0[j_q] = 0.0f;
            }
            // o0 ← 0
            for (int j_q = 0; j_q < e_i_q; ++j_q) {
                for (int j_d = 0; j_d < 16; ++j_d) {
                    o0[j_d + 16*j_q] = 0.0f;
                }
            }
            for (int i_x = 0; i_x < 6; ++i_x) {   // stream x by 16
                const int e_i_x = NC_MIN(16, 90 - 16*i_x);
                x1_1 = x1 + 256*i_x;   // x1_1 ← view of x1[i_x·s_x : +≤s_x, :] (the cache loads it)
                x2_1 = x2 + 256*i_x;   // x2_1 ← view of x2[i_x·s_x : +≤s_x, :] (the cache loads it)
                // contract10 ← ·(x0_1, x1_1)
                {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, e_i_q, e_i_x, 16, 1.0f, x0_1 + 0, 16, x1_1 + 0, 16, 0.0f, contract10 + 0, 16);
                }
                // softmax_unscaled11_0, mu0, softmax_unscaled12_2, z0 ← SoftMax₁(contract10, mu0, z0)
                {   // rows in three passes: maxima; μ and δ (vectorised over rows); exponentials and sums
                    for (int j_q = 0; j_q < e_i_q; ++j_q) {
                        float nc_m = -INFINITY;
                        #pragma omp simd reduction(max:nc_m)
                        for (int j_x = 0; j_x < e_i_x; ++j_x) {
                            nc_m = nc_fold_max(nc_m, 0.25f * contract10[16*j_q + j_x]);
                        }
                        nc_rows[j_q] = nc_m;
                    }
                    #pragma omp simd
                    for (int j_q = 0; j_q < e_i_q; ++j_q) {
                        const float nc_mp = mu0[j_q];
                        const float nc_m = nc_fmax(nc_rows[j_q], nc_mp);
                        const float nc_ms = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : 0.0f;
                        const float nc_d = (nc_mp == -INFINITY) ? 0.0f : nc_exp(nc_mp - nc_ms);   // δ, safe at μ′ = −∞
                        mu0[j_q] = nc_m;
                        softmax_unscaled12_2[j_q] = nc_d;
                        nc_rows[j_q] = nc_ms;
                        nc_rows[32 + j_q] = nc_d;
                    }
                    for (int j_q = 0; j_q < e_i_q; ++j_q) {
                        const float nc_ms = nc_rows[j_q];
                        float nc_z = 0.0f;
                        {
                            float nc_z_l[NC_LANES] = {0.0f};
                            int nc_j0 = 0;
                            for (; nc_j0 + NC_LANES <= e_i_x; nc_j0 += NC_LANES) {
                                #pragma omp simd
                                for (int nc_l = 0; nc_l < NC_LANES; ++nc_l) {
                                    const int j_x = nc_j0 + nc_l;
                                    const float nc_s = nc_exp(0.25f * contract10[16*j_q + j_x] - nc_ms);
                                    softmax_unscaled11_0[16*j_q + j_x] = nc_s;
                                    nc_z_l[nc_l] += nc_s;
                                }
                            }
                            for (int j_x = nc_j0; j_x < e_i_x; ++j_x) {
                                const float nc_s = nc_exp(0.25f * contract10[16*j_q + j_x] - nc_ms);
                                softmax_unscaled11_0[16*j_q + j_x] = nc_s;
                                nc_z += nc_s;
                            }
                            nc_z += nc_sum_lanes(nc_z_l);
                        }
                        nc_z = nc_rows[32 + j_q] * z0[j_q] + nc_z;
                        z0[j_q] = nc_z;
                    }
                }
                // o0 ← mul(o0, softmax_unscaled12_2)
                for (int j_q = 0; j_q < e_i_q; ++j_q) {
                    for (int j_d = 0; j_d < 16; ++j_d) {
                        const float nc_a0 = o0[j_d + 16*j_q];
                        const float nc_a1 = softmax_unscaled12_2[j_q];
                        o0[j_d + 16*j_q] = (nc_a0 * nc_a1);
                    }
                }
                // o0 += ·(softmax_unscaled11_0, x2_1)
                {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, e_i_q, 16, e_i_x, 1.0f, softmax_unscaled11_0 + 0, 16, x2_1 + 0, 16, 1.0f, o0 + 0, 16);
                }
            }
            // tail
            // div13 ← div(o0, z0)
            for (int j_q = 0; j_q < e_i_q; ++j_q) {
                for (int j_d = 0; j_d < 16; ++j_d) {
                    const float nc_a0 = o0[j_d + 16*j_q];
                    const float nc_a1 = z0[j_q];
                    div13[j_d + 16*j_q] = (nc_a0 / nc_a1);
                }
            }
            // y0[g_q·i_q : +≤g_q, :] ← store div13
            for (int j_q = 0; j_q < NC_MIN(32, 100 - 32*i_q); ++j_q) {
                for (int j_d = 0; j_d < 16; ++j_d) {
                    y0[512*i_q + j_d + 16*j_q] = div13[j_d + 16*j_q];
                }
            }
        }
        free(nc_arena);
        free(nc_stage);
        free(nc_rows);
    }
}

void nc_run_in(const float *restrict x0, const float *restrict x1, const float *restrict x2, float *restrict y0, int nc_threads) {   // the workspace given (the caller keeps it between runs: napkin_cat.codegen.c.workspace)
    openblas_set_num_threads(1);   /* parallel over the Grid, not inside a tile */
    nc_kernel0(x0, x1, x2, y0, nc_threads);
}

void nc_run(const float *restrict x0, const float *restrict x1, const float *restrict x2, float *restrict y0, int nc_threads) {
    nc_run_in(x0, x1, x2, y0, nc_threads);
}
