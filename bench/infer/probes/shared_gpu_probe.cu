// Does work on one stream ever wait behind a never-ending kernel on another?
//
// A "persistent" kernel spins on a flag in mapped host memory on stream P,
// as ferry http's GPU workers do. On stream M the probe then runs, N times,
// what the embedding model runs: a few kernels and pinned copies, either
// eagerly, or as a CUDA graph captured and instantiated anew each time (a new
// batch shape), or as one graph replayed. Each run must finish within a
// deadline; the first that does not is a hang, and the probe says after how
// many runs it happened.
//
//   shared-gpu-probe MODE N     MODE: eager | new-graph | same-graph | new-stream
#include <cuda_runtime.h>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::_Exit(2);                                                                          \
    }                                                                                         \
  } while (0)

// One thread a block polls, with a pause between polls, as the GPU workers'
// idle poller does; the rest of the block waits at the barrier. (With every
// thread reading host memory back to back, even the probe's eager copies
// stalled: a load no real kernel puts on the bus.)
__global__ void spin(volatile unsigned* stop, unsigned long long* polls) {
  if (threadIdx.x == 0) {
    unsigned long long n = 0;
    while (*stop == 0) {
      __nanosleep(1000);
      ++n;
    }
    *polls = n;
  }
  __syncthreads();
}

__global__ void step(float* x, int n, float k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * k + 1.0f;
}

static bool wait_for(cudaStream_t s, double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      std::fprintf(stderr, "query: %s\n", cudaGetErrorString(e));
      std::_Exit(2);
    }
    if (std::chrono::steady_clock::now() > until) return false;
    usleep(100);
  }
}

static void enqueue(cudaStream_t s, float* d, float* h, int n, int kernels) {
  CHECK(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
  for (int k = 0; k < kernels; ++k) step<<<(n + 255) / 256, 256, 0, s>>>(d, n, 1.0001f);
  CHECK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s eager|new-graph|same-graph|new-stream N\n", argv[0]);
    return 2;
  }
  // Eager loading, as Ferry sets it: a kernel loaded lazily at its first
  // launch waits for the running one, which would hang every mode at once.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  const std::string mode = argv[1];
  const int runs = std::atoi(argv[2]);
  const char* conn = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  unsigned* stop_h = nullptr;
  CHECK(cudaHostAlloc(&stop_h, 64, cudaHostAllocMapped));
  *stop_h = 0;
  unsigned* stop_d = nullptr;
  CHECK(cudaHostGetDevicePointer(&stop_d, stop_h, 0));
  unsigned long long* polls = nullptr;
  CHECK(cudaMalloc(&polls, 8));
  const int n = 1 << 16;
  float *d = nullptr, *h = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMallocHost(&h, n * sizeof(float)));
  // The model's stream is made before the workers' (as in ferry http: model loaded first? both orders are
  // tried by running the probe with PERSISTENT_FIRST=1).
  cudaStream_t p = nullptr, m = nullptr;
  const bool persistent_first = std::getenv("PERSISTENT_FIRST") != nullptr;
  if (persistent_first) CHECK(cudaStreamCreateWithFlags(&p, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&m, cudaStreamNonBlocking));
  if (!persistent_first) CHECK(cudaStreamCreateWithFlags(&p, cudaStreamNonBlocking));
  spin<<<4, 1024, 0, p>>>(stop_d, polls);
  CHECK(cudaGetLastError());
  cudaGraphExec_t same = nullptr;
  for (int i = 0; i < runs; ++i) {
    cudaStream_t s = m;
    if (mode == "new-stream") CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (mode == "eager" || mode == "new-stream") {
      enqueue(s, d, h, n, 4 + i % 7);
    } else {
      cudaGraphExec_t exec = same;
      if (mode == "new-graph" || same == nullptr) {
        cudaGraph_t g = nullptr;
        CHECK(cudaStreamBeginCapture(m, cudaStreamCaptureModeThreadLocal));
        enqueue(m, d, h, n - i % 1000, 4 + i % 7);
        CHECK(cudaStreamEndCapture(m, &g));
        CHECK(cudaGraphInstantiate(&exec, g, 0));
        cudaGraphDestroy(g);
        if (mode == "same-graph") same = exec;
      }
      CHECK(cudaGraphLaunch(exec, m));
    }
    if (!wait_for(s, 3.0)) {
      std::printf("HANG mode=%s connections=%s persistent_first=%d: run %d of %d did not finish in 3 s\n",
                  mode.c_str(), conn ? conn : "default", persistent_first, i + 1, runs);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
  *stop_h = 1;
  const bool stopped = wait_for(p, 3.0);
  std::printf("OK mode=%s connections=%s persistent_first=%d: %d runs beside a running kernel%s\n",
              mode.c_str(), conn ? conn : "default", persistent_first, runs,
              stopped ? "" : " (it did not stop!)");
  return 0;
}
