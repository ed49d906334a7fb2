//go:build cuda

#include "cuda_shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The Go enums of tensormap.go carry the driver's values.
_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
_Static_assert(CU_TENSOR_MAP_DATA_TYPE_UINT8 == 0, "dtype u8");
_Static_assert(CU_TENSOR_MAP_DATA_TYPE_INT64 == 5, "dtype i64");
_Static_assert(CU_TENSOR_MAP_DATA_TYPE_FLOAT16 == 6, "dtype f16");
_Static_assert(CU_TENSOR_MAP_DATA_TYPE_FLOAT32 == 7, "dtype f32");
_Static_assert(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == 9, "dtype bf16");
_Static_assert(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ == 12, "dtype tf32 ftz");
_Static_assert(CU_TENSOR_MAP_INTERLEAVE_32B == 2, "interleave 32B");
_Static_assert(CU_TENSOR_MAP_SWIZZLE_32B == 1, "swizzle 32B");
_Static_assert(CU_TENSOR_MAP_SWIZZLE_128B == 3, "swizzle 128B");
_Static_assert(CU_TENSOR_MAP_L2_PROMOTION_L2_256B == 3, "L2 256B");
_Static_assert(CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA == 1, "OOB NaN");

#define MK_STR_(x) #x
#define MK_STR(x) MK_STR_(x)

// Every driver entry point used, by its documented name. The header maps some
// names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2); the pointer type
// comes from the header's declaration and the dlsym name from the macro
// expansion, so both follow the header.
#define MK_DRIVER_FUNCS(X)                                                                   \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                    \
	X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)            \
	X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)             \
	X(cuCtxSetCurrent) X(cuCtxSynchronize)                                                   \
	X(cuMemAlloc) X(cuMemFree) X(cuMemsetD8) X(cuMemsetD8Async)                              \
	X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) \
	X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                              \
	X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)                \
	X(cuEventElapsedTime)                                                                    \
	X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)                           \
	X(cuFuncGetAttribute) X(cuFuncSetAttribute)                                              \
	X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuTensorMapEncodeTiled)

#define MK_DECLARE(name) static __typeof__(name) *p_##name;
MK_DRIVER_FUNCS(MK_DECLARE)

// cuFuncGetParamInfo (CUDA 12.4+) is optional: without it Launch does not
// check argument sizes against the kernel.
typedef CUresult (*mk_funcGetParamInfo_t)(CUfunction, size_t, size_t *, size_t *);
static mk_funcGetParamInfo_t p_cuFuncGetParamInfo;

int mk_load(char *msg, size_t msglen) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(msg, msglen, "%s", e ? e : "dlopen libcuda.so.1 failed");
		h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
		if (!h) return 1;
	}
#define MK_LOAD(name)                                                                  \
	p_##name = (__typeof__(p_##name))dlsym(h, MK_STR(name));                           \
	if (!p_##name) {                                                                   \
		snprintf(msg, msglen, "libcuda has no %s (driver older than the CUDA headers)", \
		         MK_STR(name));                                                        \
		return 1;                                                                      \
	}
	MK_DRIVER_FUNCS(MK_LOAD)
#undef MK_LOAD
	p_cuFuncGetParamInfo = (mk_funcGetParamInfo_t)dlsym(h, "cuFuncGetParamInfo");
	return 0;
}

int mk_has_param_info(void) { return p_cuFuncGetParamInfo != NULL; }

#define MK_SET(c)                                   \
	do {                                            \
		CUresult r_ = p_cuCtxSetCurrent(c);         \
		if (r_ != CUDA_SUCCESS) return r_;          \
	} while (0)

CUresult mk_init(void) { return p_cuInit(0); }
CUresult mk_driverGetVersion(int *v) { return p_cuDriverGetVersion(v); }

void mk_errorName(CUresult r, const char **name, const char **msg) {
	*name = NULL;
	*msg = NULL;
	if (p_cuGetErrorName) p_cuGetErrorName(r, name);
	if (p_cuGetErrorString) p_cuGetErrorString(r, msg);
}

CUresult mk_deviceGetCount(int *n) { return p_cuDeviceGetCount(n); }
CUresult mk_deviceGet(CUdevice *d, int ordinal) { return p_cuDeviceGet(d, ordinal); }
CUresult mk_deviceGetName(char *name, int len, CUdevice d) { return p_cuDeviceGetName(name, len, d); }
CUresult mk_deviceGetAttribute(int *v, int attr, CUdevice d) {
	return p_cuDeviceGetAttribute(v, (CUdevice_attribute)attr, d);
}
CUresult mk_deviceTotalMem(size_t *bytes, CUdevice d) { return p_cuDeviceTotalMem(bytes, d); }
CUresult mk_primaryCtxRetain(CUcontext *c, CUdevice d) { return p_cuDevicePrimaryCtxRetain(c, d); }
CUresult mk_primaryCtxRelease(CUdevice d) { return p_cuDevicePrimaryCtxRelease(d); }
CUresult mk_ctxSynchronize(CUcontext c) {
	MK_SET(c);
	return p_cuCtxSynchronize();
}

CUresult mk_memAlloc(CUcontext c, CUdeviceptr *p, size_t bytes) {
	MK_SET(c);
	return p_cuMemAlloc(p, bytes);
}
CUresult mk_memFree(CUcontext c, CUdeviceptr p) {
	MK_SET(c);
	return p_cuMemFree(p);
}
CUresult mk_memsetD8(CUcontext c, CUdeviceptr p, unsigned char v, size_t bytes) {
	MK_SET(c);
	return p_cuMemsetD8(p, v, bytes);
}
CUresult mk_memsetD8Async(CUcontext c, CUdeviceptr p, unsigned char v, size_t bytes, CUstream s) {
	MK_SET(c);
	return p_cuMemsetD8Async(p, v, bytes, s);
}
CUresult mk_memcpyHtoD(CUcontext c, CUdeviceptr dst, const void *src, size_t bytes) {
	MK_SET(c);
	return p_cuMemcpyHtoD(dst, src, bytes);
}
CUresult mk_memcpyDtoH(CUcontext c, void *dst, CUdeviceptr src, size_t bytes) {
	MK_SET(c);
	return p_cuMemcpyDtoH(dst, src, bytes);
}
CUresult mk_memcpyDtoD(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
	MK_SET(c);
	return p_cuMemcpyDtoD(dst, src, bytes);
}
CUresult mk_memcpyHtoDAsync(CUcontext c, CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
	MK_SET(c);
	return p_cuMemcpyHtoDAsync(dst, src, bytes, s);
}
CUresult mk_memcpyDtoHAsync(CUcontext c, void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
	MK_SET(c);
	return p_cuMemcpyDtoHAsync(dst, src, bytes, s);
}

CUresult mk_streamCreate(CUcontext c, CUstream *s) {
	MK_SET(c);
	return p_cuStreamCreate(s, CU_STREAM_DEFAULT);
}
CUresult mk_streamDestroy(CUcontext c, CUstream s) {
	MK_SET(c);
	return p_cuStreamDestroy(s);
}
CUresult mk_streamSynchronize(CUcontext c, CUstream s) {
	MK_SET(c);
	return p_cuStreamSynchronize(s);
}
CUresult mk_eventCreate(CUcontext c, CUevent *e) {
	MK_SET(c);
	return p_cuEventCreate(e, CU_EVENT_DEFAULT);
}
CUresult mk_eventDestroy(CUcontext c, CUevent e) {
	MK_SET(c);
	return p_cuEventDestroy(e);
}
CUresult mk_eventRecord(CUcontext c, CUevent e, CUstream s) {
	MK_SET(c);
	return p_cuEventRecord(e, s);
}
CUresult mk_eventSynchronize(CUcontext c, CUevent e) {
	MK_SET(c);
	return p_cuEventSynchronize(e);
}
CUresult mk_eventElapsedTime(CUcontext c, float *ms, CUevent start, CUevent end) {
	MK_SET(c);
	return p_cuEventElapsedTime(ms, start, end);
}

CUresult mk_moduleLoad(CUcontext c, CUmodule *m, const char *image,
                       char *errLog, size_t errLen, char *infoLog, size_t infoLen) {
	MK_SET(c);
	CUjit_option opts[5] = {
	    CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
	    CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
	    CU_JIT_LOG_VERBOSE,
	};
	void *vals[5] = {
	    errLog,  (void *)(uintptr_t)errLen,
	    infoLog, (void *)(uintptr_t)infoLen,
	    (void *)(uintptr_t)1,
	};
	return p_cuModuleLoadDataEx(m, image, 5, opts, vals);
}
CUresult mk_moduleUnload(CUcontext c, CUmodule m) {
	MK_SET(c);
	return p_cuModuleUnload(m);
}
CUresult mk_moduleGetFunction(CUcontext c, CUfunction *f, CUmodule m, const char *name) {
	MK_SET(c);
	return p_cuModuleGetFunction(f, m, name);
}
CUresult mk_funcGetAttribute(CUcontext c, int *v, int attr, CUfunction f) {
	MK_SET(c);
	return p_cuFuncGetAttribute(v, (CUfunction_attribute)attr, f);
}
CUresult mk_funcSetAttribute(CUcontext c, CUfunction f, int attr, int v) {
	MK_SET(c);
	return p_cuFuncSetAttribute(f, (CUfunction_attribute)attr, v);
}
CUresult mk_funcGetParamInfo(CUcontext c, CUfunction f, size_t i, size_t *off, size_t *size) {
	if (!p_cuFuncGetParamInfo) return CUDA_ERROR_NOT_SUPPORTED;
	MK_SET(c);
	return p_cuFuncGetParamInfo(f, i, off, size);
}

// mk_launch copies the packed arguments into C memory (128-byte aligned, so
// every by-value parameter is at least as aligned on the host as in the
// kernel) and builds the kernelParams array of pointers into it; the driver
// copies the values during the call, so both are freed on return.
CUresult mk_launch(CUcontext c, CUfunction f, int ex,
                   unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz,
                   unsigned cx, unsigned cy, unsigned cz,
                   unsigned sharedBytes, CUstream s,
                   const void *blob, size_t blobLen, const uint64_t *offs, int n) {
	MK_SET(c);
	void *store = NULL;
	void **params = NULL;
	if (n > 0) {
		if (posix_memalign(&store, 128, blobLen) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(store, blob, blobLen);
		params = (void **)malloc((size_t)n * sizeof(void *));
		if (!params) {
			free(store);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (int i = 0; i < n; i++) params[i] = (char *)store + offs[i];
	}
	CUresult r;
	if (!ex) {
		r = p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sharedBytes, s, params, NULL);
	} else {
		CUlaunchAttribute attrs[1];
		CUlaunchConfig cfg;
		memset(attrs, 0, sizeof attrs);
		memset(&cfg, 0, sizeof cfg);
		cfg.gridDimX = gx;
		cfg.gridDimY = gy;
		cfg.gridDimZ = gz;
		cfg.blockDimX = bx;
		cfg.blockDimY = by;
		cfg.blockDimZ = bz;
		cfg.sharedMemBytes = sharedBytes;
		cfg.hStream = s;
		if (cx > 0) {
			attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
			attrs[0].value.clusterDim.x = cx;
			attrs[0].value.clusterDim.y = cy;
			attrs[0].value.clusterDim.z = cz;
			cfg.attrs = attrs;
			cfg.numAttrs = 1;
		}
		r = p_cuLaunchKernelEx(&cfg, f, params, NULL);
	}
	free(params);
	free(store);
	return r;
}

CUresult mk_tensorMapEncodeTiled(CUcontext c, void *out, int dtype, unsigned rank, uint64_t addr,
                                 const cuuint64_t *dims, const cuuint64_t *strides,
                                 const cuuint32_t *box, const cuuint32_t *elemStrides,
                                 int interleave, int swizzle, int l2, int oob) {
	MK_SET(c); // the driver checks the address against the current context
	CUtensorMap tm; // 64-byte aligned by its declaration
	memset(&tm, 0, sizeof tm);
	CUresult r = p_cuTensorMapEncodeTiled(
	    &tm, (CUtensorMapDataType)dtype, rank, (void *)(uintptr_t)addr, dims, strides, box,
	    elemStrides, (CUtensorMapInterleave)interleave, (CUtensorMapSwizzle)swizzle,
	    (CUtensorMapL2promotion)l2, (CUtensorMapFloatOOBfill)oob);
	if (r == CUDA_SUCCESS) memcpy(out, &tm, sizeof tm);
	return r;
}
