//go:build cuda

// The C side of package driver under the "cuda" build tag: libcuda is
// opened with dlopen at first use (so a binary built here starts on a machine
// without a driver and reports "no device"), and every call that needs a
// context makes the context current on the calling OS thread first, because a
// goroutine may move between threads between two calls.
#ifndef MOKC_CUDA_SHIM_H
#define MOKC_CUDA_SHIM_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

int mk_load(char *msg, size_t msglen);
int mk_has_param_info(void);

CUresult mk_init(void);
CUresult mk_driverGetVersion(int *v);
void mk_errorName(CUresult r, const char **name, const char **msg);

CUresult mk_deviceGetCount(int *n);
CUresult mk_deviceGet(CUdevice *d, int ordinal);
CUresult mk_deviceGetName(char *name, int len, CUdevice d);
CUresult mk_deviceGetAttribute(int *v, int attr, CUdevice d);
CUresult mk_deviceTotalMem(size_t *bytes, CUdevice d);
CUresult mk_primaryCtxRetain(CUcontext *c, CUdevice d);
CUresult mk_primaryCtxRelease(CUdevice d);
CUresult mk_ctxSynchronize(CUcontext c);

CUresult mk_memAlloc(CUcontext c, CUdeviceptr *p, size_t bytes);
CUresult mk_memFree(CUcontext c, CUdeviceptr p);
CUresult mk_memsetD8(CUcontext c, CUdeviceptr p, unsigned char v, size_t bytes);
CUresult mk_memsetD8Async(CUcontext c, CUdeviceptr p, unsigned char v, size_t bytes, CUstream s);
CUresult mk_memcpyHtoD(CUcontext c, CUdeviceptr dst, const void *src, size_t bytes);
CUresult mk_memcpyDtoH(CUcontext c, void *dst, CUdeviceptr src, size_t bytes);
CUresult mk_memcpyDtoD(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t bytes);
CUresult mk_memcpyHtoDAsync(CUcontext c, CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
CUresult mk_memcpyDtoHAsync(CUcontext c, void *dst, CUdeviceptr src, size_t bytes, CUstream s);

CUresult mk_streamCreate(CUcontext c, CUstream *s);
CUresult mk_streamDestroy(CUcontext c, CUstream s);
CUresult mk_streamSynchronize(CUcontext c, CUstream s);
CUresult mk_streamBeginCapture(CUcontext c, CUstream s);
CUresult mk_streamEndCapture(CUcontext c, CUstream s, CUgraph *g);
CUresult mk_graphInstantiate(CUcontext c, CUgraphExec *e, CUgraph g);
CUresult mk_graphLaunch(CUcontext c, CUgraphExec e, CUstream s);
CUresult mk_graphExecDestroy(CUcontext c, CUgraphExec e);
CUresult mk_graphDestroy(CUcontext c, CUgraph g);
CUresult mk_eventCreate(CUcontext c, CUevent *e);
CUresult mk_eventDestroy(CUcontext c, CUevent e);
CUresult mk_eventRecord(CUcontext c, CUevent e, CUstream s);
CUresult mk_eventSynchronize(CUcontext c, CUevent e);
CUresult mk_eventElapsedTime(CUcontext c, float *ms, CUevent start, CUevent end);

CUresult mk_moduleLoad(CUcontext c, CUmodule *m, const char *image,
                       char *errLog, size_t errLen, char *infoLog, size_t infoLen);
CUresult mk_moduleUnload(CUcontext c, CUmodule m);
CUresult mk_moduleGetFunction(CUcontext c, CUfunction *f, CUmodule m, const char *name);
CUresult mk_funcGetAttribute(CUcontext c, int *v, int attr, CUfunction f);
CUresult mk_funcSetAttribute(CUcontext c, CUfunction f, int attr, int v);
CUresult mk_maxActiveClusters(CUcontext c, int *n, CUfunction f, unsigned gx, unsigned bx,
                              unsigned sharedBytes, unsigned cx);
CUresult mk_maxActiveBlocks(CUcontext c, int *n, CUfunction f, int bx, size_t sharedBytes);
CUresult mk_funcGetParamInfo(CUcontext c, CUfunction f, size_t i, size_t *off, size_t *size);

CUresult mk_launch(CUcontext c, CUfunction f, int ex,
                   unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz,
                   unsigned cx, unsigned cy, unsigned cz, int programmatic,
                   unsigned sharedBytes, CUstream s,
                   const void *blob, size_t blobLen, const uint64_t *offs, int n);

CUresult mk_tensorMapEncodeTiled(CUcontext c, void *out, int dtype, unsigned rank, uint64_t addr,
                                 const cuuint64_t *dims, const cuuint64_t *strides,
                                 const cuuint32_t *box, const cuuint32_t *elemStrides,
                                 int interleave, int swizzle, int l2, int oob);

#endif
