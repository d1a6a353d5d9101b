/* A stand-in for libhipblas, for the unit tests of the run-time binding
 * (device/src/hipblas.rs): the exported names and C types of hipblas.h, with GEMM done
 * on host memory in fp32 so a test can check the call end to end without a GPU. It checks what
 * the real library checks (operation and algorithm enums, the data/compute type codes of the
 * ABI it stands for, leading dimensions, pointer mode) and returns the real status values.
 *
 * One of: -DSTUB_V2 (hipBLAS 2.x: hipblasGemmEx_v2 with hipDataType/hipblasComputeType_t, and
 * the plain name with the legacy hipblasDatatype_t), -DSTUB_V3 (3.x: the plain name with
 * hipDataType), -DSTUB_LEGACY (0.x/1.x: the plain name, legacy types). */
#include <stdint.h>
#include <string.h>

typedef void *hipblasHandle_t;

enum { SUCCESS = 0, NOT_INITIALIZED = 1, ALLOC_FAILED = 2, INVALID_VALUE = 3,
       HANDLE_IS_NULLPTR = 9, INVALID_ENUM = 10 };

struct stub_handle { void *stream; int pointer_mode, atomics_mode, live; };
static struct stub_handle handles[8];
static int n_handles;

int hipblasCreate(hipblasHandle_t *h) {
  if (!h) return HANDLE_IS_NULLPTR;
  if (n_handles == 8) return ALLOC_FAILED;
  struct stub_handle *s = &handles[n_handles++];
  s->stream = 0; s->pointer_mode = -1; s->atomics_mode = -1; s->live = 1;
  *h = s;
  return SUCCESS;
}

static struct stub_handle *live(hipblasHandle_t h) {
  struct stub_handle *s = (struct stub_handle *)h;
  return s && s->live ? s : 0;
}

int hipblasDestroy(hipblasHandle_t h) {
  struct stub_handle *s = live(h);
  if (!s) return NOT_INITIALIZED;
  s->live = 0;
  return SUCCESS;
}

int hipblasSetStream(hipblasHandle_t h, void *stream) {
  struct stub_handle *s = live(h);
  if (!s) return NOT_INITIALIZED;
  s->stream = stream;
  return SUCCESS;
}

int hipblasSetPointerMode(hipblasHandle_t h, int mode) {
  struct stub_handle *s = live(h);
  if (!s) return NOT_INITIALIZED;
  if (mode != 0 && mode != 1) return INVALID_ENUM;
  s->pointer_mode = mode;
  return SUCCESS;
}

int hipblasSetAtomicsMode(hipblasHandle_t h, int mode) {
  struct stub_handle *s = live(h);
  if (!s) return NOT_INITIALIZED;
  if (mode != 0 && mode != 1) return INVALID_ENUM;
  s->atomics_mode = mode;
  return SUCCESS;
}

/* For the test: what a handle was set up with (live = 0 once destroyed). */
void stub_handle_state(hipblasHandle_t h, void **stream, int *pointer_mode, int *atomics_mode,
                       int *is_live) {
  struct stub_handle *s = (struct stub_handle *)h;
  *stream = s->stream; *pointer_mode = s->pointer_mode; *atomics_mode = s->atomics_mode;
  *is_live = s->live;
}

static float load(const void *p, long i, int bf16) {
  uint16_t b = ((const uint16_t *)p)[i];
  if (bf16) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  _Float16 h;
  memcpy(&h, &b, 2);
  return (float)h;
}

static void store(void *p, long i, float v, int bf16) {
  uint16_t b;
  if (bf16) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) b = (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    else b = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);       /* nearest even */
  } else {
    _Float16 h = (_Float16)v;
    memcpy(&b, &h, 2);
  }
  ((uint16_t *)p)[i] = b;
}

static int max1(int v) { return v > 1 ? v : 1; }

static int gemm(int hip_data_type, hipblasHandle_t h, int ta, int tb, int m, int n, int k,
                const void *alpha, const void *A, int at, int lda, const void *B, int bt, int ldb,
                const void *beta, void *C, int ct, int ldc, int compute, int algo) {
  struct stub_handle *s = live(h);
  if (!s) return NOT_INITIALIZED;
  if (ta < 111 || ta > 112 || tb < 111 || tb > 112 || algo != 160) return INVALID_ENUM;
  int f16 = hip_data_type ? 2 : 150, bf16 = hip_data_type ? 14 : 168;
  int c32 = hip_data_type ? 2 : 151;
  if (at != bt || at != ct || (at != f16 && at != bf16) || compute != c32) return INVALID_ENUM;
  if (s->pointer_mode != 0) return INVALID_VALUE;
  int rows_a = ta == 111 ? m : k, rows_b = tb == 111 ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < max1(rows_a) || ldb < max1(rows_b) || ldc < max1(m))
    return INVALID_VALUE;
  int is_bf16 = at == bf16;
  float al = *(const float *)alpha, be = *(const float *)beta;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      float acc = 0.0f;
      for (int p = 0; p < k; p++) {
        float a = ta == 111 ? load(A, i + (long)p * lda, is_bf16) : load(A, p + (long)i * lda, is_bf16);
        float b = tb == 111 ? load(B, p + (long)j * ldb, is_bf16) : load(B, j + (long)p * ldb, is_bf16);
        acc += a * b;
      }
      long c = i + (long)j * ldc;
      float prior = be == 0.0f ? 0.0f : be * load(C, c, is_bf16);
      store(C, c, al * acc + prior, is_bf16);
    }
  return SUCCESS;
}

#define GEMM_PARAMS                                                                             \
  hipblasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,    \
      int at, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct,       \
      int ldc, int compute, int algo
#define GEMM_ARGS h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo

#if defined(STUB_V2)
int hipblasGemmEx_v2(GEMM_PARAMS) { return gemm(1, GEMM_ARGS); }
int hipblasGemmEx(GEMM_PARAMS) { return gemm(0, GEMM_ARGS); }
#elif defined(STUB_V3)
int hipblasGemmEx(GEMM_PARAMS) { return gemm(1, GEMM_ARGS); }
#elif defined(STUB_LEGACY)
int hipblasGemmEx(GEMM_PARAMS) { return gemm(0, GEMM_ARGS); }
#else
#error "define STUB_V2, STUB_V3 or STUB_LEGACY"
#endif
