#include <math.h>

#define NC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NC_MAX(a, b) ((a) > (b) ? (a) : (b))

__device__ __forceinline__ float nc_exp(float x) { return expf(x); }
__device__ __forceinline__ float nc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float nc_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float nc_gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}


extern "C" __global__ void __launch_bounds__(128) nc_kernel0(const float *__restrict__ x0, const float *__restrict__ x1, float *__restrict__ y0) {
    __shared__ __align__(16) unsigned char nc_arena[320];   // level 1, the plan's columns
    const long nc_b = blockIdx.x;
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
    for (int nc_e = threadIdx.x; nc_e < (e_i_a) * (e_i_c); nc_e += blockDim.x) {
        const int j_a = nc_e / e_i_c;
        const int j_c = nc_e % e_i_c;
        sum0[4*j_a + j_c] = 0.0f;
    }
    __syncthreads();
    for (int i_b = 0; i_b < 2; ++i_b) {   // stream b by 8
        const int e_i_b = NC_MIN(8, 12 - 8*i_b);
        // x0_1 ← load x0[g_a·i_a : +≤g_a, i_b·s_b : +≤s_b]
        for (int nc_e = threadIdx.x; nc_e < (e_i_a) * (e_i_b); nc_e += blockDim.x) {
            const int j_a = nc_e / e_i_b;
            const int j_b = nc_e % e_i_b;
            x0_1[8*j_a + j_b] = x0[48*i_a + 8*i_b + 12*j_a + j_b];
        }
        __syncthreads();
        // x1_1 ← load x1[i_b·s_b : +≤s_b, g_c·i_c : +≤g_c]
        for (int nc_e = threadIdx.x; nc_e < (e_i_b) * (e_i_c); nc_e += blockDim.x) {
            const int j_b = nc_e / e_i_c;
            const int j_c = nc_e % e_i_c;
            x1_1[4*j_b + j_c] = x1[72*i_b + 4*i_c + 9*j_b + j_c];
        }
        __syncthreads();
        // sum0 += ·(x0_1, x1_1)
        for (int nc_e = threadIdx.x; nc_e < (e_i_a) * (e_i_c); nc_e += blockDim.x) {
            const int j_a = nc_e / e_i_c;
            const int j_c = nc_e % e_i_c;
            float nc_acc = 0.0f;
            for (int j_b = 0; j_b < e_i_b; ++j_b) {
                nc_acc += x0_1[8*j_a + j_b] * x1_1[4*j_b + j_c];
            }
            sum0[4*j_a + j_c] = sum0[4*j_a + j_c] + nc_acc;
        }
        __syncthreads();
    }
    // tail
    // y0[g_a·i_a : +≤g_a, g_c·i_c : +≤g_c] ← store sum0
    for (int nc_e = threadIdx.x; nc_e < (NC_MIN(4, 10 - 4*i_a)) * (NC_MIN(4, 9 - 4*i_c)); nc_e += blockDim.x) {
        const int j_a = nc_e / (NC_MIN(4, 9 - 4*i_c));
        const int j_c = nc_e % (NC_MIN(4, 9 - 4*i_c));
        y0[36*i_a + 4*i_c + 9*j_a + j_c] = sum0[4*j_a + j_c];
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
extern "C" int nc_run(const float *x0, const float *x1, float *y0) {
    cudaError_t nc_err = (cudaError_t)nc_configure();
    if (nc_err == cudaSuccess) {
        nc_kernel0<<<9, 128>>>(x0, x1, y0);
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
