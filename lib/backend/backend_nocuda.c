/* hz_backend_cuda_create for builds without CUDA (meson compiles this file only when hz_have_cuda is
 * false; cuda/backend_cuda.c provides the real one otherwise). */
#include "backend/backend.h"

int hz_backend_cuda_create(int ordinal, hz_backend **out) {
    if (out) *out = NULL;
    return hz_error(HZ_EUNSUPPORTED, "cuda:%d: libhorizon was built without CUDA", ordinal);
}
