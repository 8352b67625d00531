#include <math.h>

#define NC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NC_MAX(a, b) ((a) > (b) ? (a) : (b))

__device__ __forceinline__ float nc_exp(float x) { return expf(x); }
__device__ __forceinline__ float nc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float nc_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float nc_gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}


extern "C" __global__ void __launch_bounds__(128) nc_kernel0(const float *__restrict__ x0, const float *__restrict__ x1, const float *__restrict__ x2, float *__restrict__ y0) {
    __shared__ __align__(16) unsigned char nc_arena[7552];   // level 1, the plan's columns
    float nc_stage[4];   // staged values (registers)
    const long nc_b = blockIdx.x;
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
    for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (16); nc_e += blockDim.x) {
        const int j_q = nc_e / 16;
        const int j_d = nc_e % 16;
        x0_1[j_d + 16*j_q] = x0[512*i_q + j_d + 16*j_q];
    }
    __syncthreads();
    // mu0 ← -inf
    for (int nc_e = threadIdx.x; nc_e < e_i_q; nc_e += blockDim.x) {
        const int j_q = nc_e;
        mu0[j_q] = -INFINITY;
    }
    __syncthreads();
    // z0 ← 0
    for (int nc_e = threadIdx.x; nc_e < e_i_q; nc_e += blockDim.x) {
        const int j_q = nc_e;
        z0[j_q] = 0.0f;
    }
    __syncthreads();
    // o0 ← 0
    for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (16); nc_e += blockDim.x) {
        const int j_q = nc_e / 16;
        const int j_d = nc_e % 16;
        o0[j_d + 16*j_q] = 0.0f;
    }
    __syncthreads();
    for (int i_x = 0; i_x < 6; ++i_x) {   // stream x by 16
        const int e_i_x = NC_MIN(16, 90 - 16*i_x);
        // x1_1 ← load x1[i_x·s_x : +≤s_x, :]
        for (int nc_e = threadIdx.x; nc_e < (e_i_x) * (16); nc_e += blockDim.x) {
            const int j_x = nc_e / 16;
            const int j_d = nc_e % 16;
            x1_1[j_d + 16*j_x] = x1[256*i_x + j_d + 16*j_x];
        }
        __syncthreads();
        // x2_1 ← load x2[i_x·s_x : +≤s_x, :]
        for (int nc_e = threadIdx.x; nc_e < (e_i_x) * (16); nc_e += blockDim.x) {
            const int j_x = nc_e / 16;
            const int j_d = nc_e % 16;
            x2_1[j_d + 16*j_x] = x2[256*i_x + j_d + 16*j_x];
        }
        __syncthreads();
        // contract10 ← ·(x0_1, x1_1)
        {   // staged: contract10 take bytes this statement reads
            int nc_k0 = 0;
            for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (e_i_x); nc_e += blockDim.x) {
                const int j_q = nc_e / e_i_x;
                const int j_x = nc_e % e_i_x;
                float nc_acc = 0.0f;
                for (int j_d = 0; j_d < 16; ++j_d) {
                    nc_acc += x0_1[j_d + 16*j_q] * x1_1[j_d + 16*j_x];
                }
                nc_stage[nc_k0++] = nc_acc;
            }
            __syncthreads();
            nc_k0 = 0;
            for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (e_i_x); nc_e += blockDim.x) {
                const int j_q = nc_e / e_i_x;
                const int j_x = nc_e % e_i_x;
                contract10[16*j_q + j_x] = nc_stage[nc_k0++];
            }
        }
        __syncthreads();
        // softmax_unscaled11_0, mu0, softmax_unscaled12_2, z0 ← SoftMax₁(contract10, mu0, z0)
        for (int nc_e = threadIdx.x; nc_e < e_i_q; nc_e += blockDim.x) {
            const int j_q = nc_e;
            float nc_m = -INFINITY;
            for (int j_x = 0; j_x < e_i_x; ++j_x) {
                nc_m = fmaxf(nc_m, 0.25f * contract10[16*j_q + j_x]);
            }
            const float nc_mp = mu0[j_q];
            const float nc_zp = z0[j_q];
            nc_m = fmaxf(nc_m, nc_mp);
            const float nc_ms = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : 0.0f;
            const float nc_d = (nc_mp == -INFINITY) ? 0.0f : nc_exp(nc_mp - nc_ms);   // δ, safe at μ′ = −∞
            float nc_z = 0.0f;
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
        __syncthreads();
        // o0 ← mul(o0, softmax_unscaled12_2)
        for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (16); nc_e += blockDim.x) {
            const int j_q = nc_e / 16;
            const int j_d = nc_e % 16;
            o0[j_d + 16*j_q] = (o0[j_d + 16*j_q] * softmax_unscaled12_2[j_q]);
        }
        __syncthreads();
        // o0 += ·(softmax_unscaled11_0, x2_1)
        for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (16); nc_e += blockDim.x) {
            const int j_q = nc_e / 16;
            const int j_d = nc_e % 16;
            float nc_acc = 0.0f;
            for (int j_x = 0; j_x < e_i_x; ++j_x) {
                nc_acc += softmax_unscaled11_0[16*j_q + j_x] * x2_1[j_d + 16*j_x];
            }
            o0[j_d + 16*j_q] = o0[j_d + 16*j_q] + nc_acc;
        }
        __syncthreads();
    }
    // tail
    // div13 ← div(o0, z0)
    for (int nc_e = threadIdx.x; nc_e < (e_i_q) * (16); nc_e += blockDim.x) {
        const int j_q = nc_e / 16;
        const int j_d = nc_e % 16;
        div13[j_d + 16*j_q] = (o0[j_d + 16*j_q] / z0[j_q]);
    }
    __syncthreads();
    // y0[g_q·i_q : +≤g_q, :] ← store div13
    for (int nc_e = threadIdx.x; nc_e < (NC_MIN(32, 100 - 32*i_q)) * (16); nc_e += blockDim.x) {
        const int j_q = nc_e / 16;
        const int j_d = nc_e % 16;
        y0[512*i_q + j_d + 16*j_q] = div13[j_d + 16*j_q];
    }
    __syncthreads();
}

// ---------------------------------------------------------------- host side
#define NC_TRY(call) do { if (nc_err == cudaSuccess) nc_err = (call); } while (0)

extern "C" const char *nc_error_name(int code) { return cudaGetErrorName((cudaError_t)code); }
extern "C" const char *nc_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }
extern "C" int nc_set_device(int device) { return (int)cudaSetDevice(device); }
extern "C" int nc_malloc(void **ptr, size_t bytes) { return (int)cudaMalloc(ptr, bytes); }
extern "C" int nc_free(void *ptr) { return (int)cudaFree(ptr); }
extern "C" int nc_to_device(void *dst, const void *src, size_t bytes) {
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}
extern "C" int nc_to_host(void *dst, const void *src, size_t bytes) {
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}

// the launcher's opt-ins to dynamic shared memory (past the static window)
extern "C" int nc_configure(void) {
    cudaError_t nc_err = cudaSuccess;
    // none: every arena fits the static window
    return (int)nc_err;
}

// the launcher: device pointers in, one launch per kernel, in order; the first CUDA error stops it (0: success)
extern "C" int nc_run(const float *x0, const float *x1, const float *x2, float *y0) {
    cudaError_t nc_err = (cudaError_t)nc_configure();
    if (nc_err == cudaSuccess) {
        nc_kernel0<<<4, 128>>>(x0, x1, x2, y0);
        nc_err = cudaGetLastError();
    }
    NC_TRY(cudaDeviceSynchronize());   // the caller's timing includes it
    return (int)nc_err;
}

// what the driver says of kernel k (in launch order), after nc_configure: out[0] static shared bytes,
// out[1] registers, out[2] local bytes per thread, out[3] the most dynamic shared bytes it may use,
// out[4] the dynamic shared bytes its launch asks for, out[5] threads per block launched,
// out[6] the most threads per block, out[7] the binary's architecture (e.g. 90)
extern "C" int nc_kernels(void) { return 1; }
extern "C" int nc_attributes(int kernel, int *out) {
    const void *const nc_fns[] = {(const void *)nc_kernel0};
    const int nc_dynamic[] = {0};
    if (kernel < 0 || kernel >= 1) return (int)cudaErrorInvalidValue;
    cudaFuncAttributes nc_a;
    cudaError_t nc_err = (cudaError_t)nc_configure();
    NC_TRY(cudaFuncGetAttributes(&nc_a, nc_fns[kernel]));
    if (nc_err != cudaSuccess) return (int)nc_err;
    out[0] = (int)nc_a.sharedSizeBytes;
    out[1] = nc_a.numRegs;
    out[2] = (int)nc_a.localSizeBytes;
    out[3] = nc_a.maxDynamicSharedSizeBytes;
    out[4] = nc_dynamic[kernel];
    out[5] = 128;
    out[6] = nc_a.maxThreadsPerBlock;
    out[7] = nc_a.binaryVersion;
    return 0;
}
