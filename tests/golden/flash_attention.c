#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <cblas.h>
#define NC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NC_MAX(a, b) ((a) > (b) ? (a) : (b))

/* exp(x) = 2^n p(r), n = round(x / ln 2), r = x - n ln 2 (Cody-Waite); exactly 0 below the smallest
   normal exponent and for x = -inf, NaN for NaN; branch-free, so element loops vectorise. */
static inline float nc_exp(float x) {
    const float lo = -87.33654475f, hi = 88.0f;
    const float xc = fminf(fmaxf(x, lo), hi);
    const float n = floorf(xc * 1.44269504088896341f + 0.5f);
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    const float y = p * scale;
    return x != x ? x : (x < lo ? 0.0f : (x > hi ? (x > 88.72283935546875f ? INFINITY : expf(x)) : y));
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


static void nc_kernel0(const float *restrict x0, const float *restrict x1, const float *restrict x2, float *restrict y0, int nc_threads) {
    #pragma omp parallel num_threads(nc_threads)
    {
        unsigned char *nc_arena = (unsigned char *)nc_alloc(7552);   // level 1: 7552 B, the plan's columns
        float *nc_stage = (float *)nc_alloc(512 * sizeof(float));
        #pragma omp for schedule(dynamic, 1)
        for (long nc_b = 0; nc_b < 4; ++nc_b) {
            const int i_q = (int)(nc_b);
            const int e_i_q = NC_MIN(32, 100 - 32*i_q);   // group q by 32
            float *const x0_1 = (float *)(nc_arena + 0);   // 32×16
            float *const mu0 = (float *)(nc_arena + 7168);   // 32
            float *const z0 = (float *)(nc_arena + 7296);   // 32
            float *const o0 = (float *)(nc_arena + 2048);   // 32×16
            float *const x1_1 = (float *)(nc_arena + 4096);   // 16×16
            float *const x2_1 = (float *)(nc_arena + 6144);   // 16×16
            float *const contract10 = (float *)(nc_arena + 4096);   // 32×16
            float *const softmax_unscaled11_0 = (float *)(nc_arena + 4096);   // 32×16
            float *const softmax_unscaled12_2 = (float *)(nc_arena + 7424);   // 32
            float *const div13 = (float *)(nc_arena + 0);   // 32×16
            // kernel @1
            // head
            // x0_1 ← load x0[g_q·i_q : +≤g_q, :]
            for (int j_q = 0; j_q < e_i_q; ++j_q) {
                for (int j_d = 0; j_d < 16; ++j_d) {
                    x0_1[j_d + 16*j_q] = x0[512*i_q + j_d + 16*j_q];
                }
            }
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
                // x1_1 ← load x1[i_x·s_x : +≤s_x, :]
                for (int j_x = 0; j_x < e_i_x; ++j_x) {
                    for (int j_d = 0; j_d < 16; ++j_d) {
                        x1_1[j_d + 16*j_x] = x1[256*i_x + j_d + 16*j_x];
                    }
                }
                // x2_1 ← load x2[i_x·s_x : +≤s_x, :]
                for (int j_x = 0; j_x < e_i_x; ++j_x) {
                    for (int j_d = 0; j_d < 16; ++j_d) {
                        x2_1[j_d + 16*j_x] = x2[256*i_x + j_d + 16*j_x];
                    }
                }
                // contract10 ← ·(x0_1, x1_1)
                {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, e_i_q, e_i_x, 16, 1.0f, x0_1 + 0, 16, x1_1 + 0, 16, 0.0f, nc_stage + 0, 16);
                }
                for (int j_q = 0; j_q < e_i_q; ++j_q) {
                    for (int j_x = 0; j_x < e_i_x; ++j_x) {
                        contract10[16*j_q + j_x] = nc_stage[16*j_q + j_x];
                    }
                }
                // softmax_unscaled11_0, mu0, softmax_unscaled12_2, z0 ← SoftMax₁(contract10, mu0, z0)
                for (int j_q = 0; j_q < e_i_q; ++j_q) {
                    float nc_m = -INFINITY;
                    #pragma omp simd reduction(max:nc_m)
                    for (int j_x = 0; j_x < e_i_x; ++j_x) {
                        nc_m = fmaxf(nc_m, 0.25f * contract10[16*j_q + j_x]);
                    }
                    const float nc_mp = mu0[j_q];
                    const float nc_zp = z0[j_q];
                    nc_m = fmaxf(nc_m, nc_mp);
                    const float nc_ms = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : 0.0f;
                    const float nc_d = (nc_mp == -INFINITY) ? 0.0f : nc_exp(nc_mp - nc_ms);   // δ, safe at μ′ = −∞
                    float nc_z = 0.0f;
                    #pragma omp simd reduction(+:nc_z)
                    for (int j_x = 0; j_x < e_i_x; ++j_x) {
                        const float nc_s = nc_exp(0.25f * contract10[16*j_q + j_x] - nc_ms);
                        softmax_unscaled11_0[16*j_q + j_x] = nc_s;
                        nc_z += nc_s;
                    }
                    nc_z = nc_d * nc_zp + nc_z;
                    mu0[j_q] = nc_m;
                    softmax_unscaled12_2[j_q] = nc_d;
                    z0[j_q] = nc_z;
                }
                // o0 ← mul(o0, softmax_unscaled12_2)
                for (int j_q = 0; j_q < e_i_q; ++j_q) {
                    for (int j_d = 0; j_d < 16; ++j_d) {
                        o0[j_d + 16*j_q] = (o0[j_d + 16*j_q] * softmax_unscaled12_2[j_q]);
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
                    div13[j_d + 16*j_q] = (o0[j_d + 16*j_q] / z0[j_q]);
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
    }
}

void nc_run(const float *restrict x0, const float *restrict x1, const float *restrict x2, float *restrict y0, int nc_threads) {
    openblas_set_num_threads(1);   /* parallel over the Grid, not inside a tile */
    nc_kernel0(x0, x1, x2, y0, nc_threads);
}
