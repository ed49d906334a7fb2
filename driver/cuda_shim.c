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
	X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuTensorMapEncodeTiled)                          \
	X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch)     \
	X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuOccupancyMaxActiveClusters)                   \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor)

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

// MK_IN_CTX defines CUresult name(CUcontext c, params...): it makes c
// current on the calling thread (MK_SET), then returns call.
#define MK_IN_CTX(name, call, ...)          \
	CUresult name(CUcontext c, __VA_ARGS__) { \
		MK_SET(c);                          \
		return call;                        \
	}

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

MK_IN_CTX(mk_memAlloc, p_cuMemAlloc(p, bytes), CUdeviceptr *p, size_t bytes)
MK_IN_CTX(mk_memFree, p_cuMemFree(p), CUdeviceptr p)
MK_IN_CTX(mk_memsetD8, p_cuMemsetD8(p, v, bytes), CUdeviceptr p, unsigned char v, size_t bytes)
MK_IN_CTX(mk_memsetD8Async, p_cuMemsetD8Async(p, v, bytes, s), CUdeviceptr p, unsigned char v, size_t bytes, CUstream s)
MK_IN_CTX(mk_memcpyHtoD, p_cuMemcpyHtoD(dst, src, bytes), CUdeviceptr dst, const void *src, size_t bytes)
MK_IN_CTX(mk_memcpyDtoH, p_cuMemcpyDtoH(dst, src, bytes), void *dst, CUdeviceptr src, size_t bytes)
MK_IN_CTX(mk_memcpyDtoD, p_cuMemcpyDtoD(dst, src, bytes), CUdeviceptr dst, CUdeviceptr src, size_t bytes)
MK_IN_CTX(mk_memcpyHtoDAsync, p_cuMemcpyHtoDAsync(dst, src, bytes, s), CUdeviceptr dst, const void *src, size_t bytes, CUstream s)
MK_IN_CTX(mk_memcpyDtoHAsync, p_cuMemcpyDtoHAsync(dst, src, bytes, s), void *dst, CUdeviceptr src, size_t bytes, CUstream s)

MK_IN_CTX(mk_streamCreate, p_cuStreamCreate(s, CU_STREAM_DEFAULT), CUstream *s)
MK_IN_CTX(mk_streamDestroy, p_cuStreamDestroy(s), CUstream s)
MK_IN_CTX(mk_streamSynchronize, p_cuStreamSynchronize(s), CUstream s)
MK_IN_CTX(mk_streamBeginCapture, p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUstream s)
MK_IN_CTX(mk_streamEndCapture, p_cuStreamEndCapture(s, g), CUstream s, CUgraph *g)
MK_IN_CTX(mk_graphInstantiate, p_cuGraphInstantiate(e, g, 0), CUgraphExec *e, CUgraph g)
MK_IN_CTX(mk_graphLaunch, p_cuGraphLaunch(e, s), CUgraphExec e, CUstream s)
MK_IN_CTX(mk_graphExecDestroy, p_cuGraphExecDestroy(e), CUgraphExec e)
MK_IN_CTX(mk_graphDestroy, p_cuGraphDestroy(g), CUgraph g)
MK_IN_CTX(mk_eventCreate, p_cuEventCreate(e, CU_EVENT_DEFAULT), CUevent *e)
MK_IN_CTX(mk_eventDestroy, p_cuEventDestroy(e), CUevent e)
MK_IN_CTX(mk_eventRecord, p_cuEventRecord(e, s), CUevent e, CUstream s)
MK_IN_CTX(mk_eventSynchronize, p_cuEventSynchronize(e), CUevent e)
MK_IN_CTX(mk_eventElapsedTime, p_cuEventElapsedTime(ms, start, end), float *ms, CUevent start, CUevent end)

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
MK_IN_CTX(mk_moduleUnload, p_cuModuleUnload(m), CUmodule m)
MK_IN_CTX(mk_moduleGetFunction, p_cuModuleGetFunction(f, m, name), CUfunction *f, CUmodule m, const char *name)
MK_IN_CTX(mk_funcGetAttribute, p_cuFuncGetAttribute(v, (CUfunction_attribute)attr, f), int *v, int attr, CUfunction f)
MK_IN_CTX(mk_funcSetAttribute, p_cuFuncSetAttribute(f, (CUfunction_attribute)attr, v), CUfunction f, int attr, int v)
MK_IN_CTX(mk_maxActiveBlocks, p_cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, bx, sharedBytes), int *n, CUfunction f, int bx, size_t sharedBytes)
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
                   unsigned cx, unsigned cy, unsigned cz, int programmatic,
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
		CUlaunchAttribute attrs[2];
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
		unsigned na = 0;
		if (cx > 0) {
			attrs[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
			attrs[na].value.clusterDim.x = cx;
			attrs[na].value.clusterDim.y = cy;
			attrs[na].value.clusterDim.z = cz;
			na++;
		}
		if (programmatic) {
			attrs[na].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
			attrs[na].value.programmaticStreamSerializationAllowed = 1;
			na++;
		}
		if (na > 0) {
			cfg.attrs = attrs;
			cfg.numAttrs = na;
		}
		r = p_cuLaunchKernelEx(&cfg, f, params, NULL);
	}
	free(params);
	free(store);
	return r;
}

CUresult mk_maxActiveClusters(CUcontext c, int *n, CUfunction f, unsigned gx, unsigned bx,
                              unsigned sharedBytes, unsigned cx) {
	MK_SET(c);
	CUlaunchAttribute attr;
	CUlaunchConfig cfg;
	memset(&attr, 0, sizeof attr);
	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = gx;
	cfg.gridDimY = 1;
	cfg.gridDimZ = 1;
	cfg.blockDimX = bx;
	cfg.blockDimY = 1;
	cfg.blockDimZ = 1;
	cfg.sharedMemBytes = sharedBytes;
	attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	attr.value.clusterDim.x = cx;
	attr.value.clusterDim.y = 1;
	attr.value.clusterDim.z = 1;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	return p_cuOccupancyMaxActiveClusters(n, f, &cfg);
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
