// The CUDA kernels of Ferry's built-in handlers, instantiated exactly as a
// user's handler is (ferry/worker/cuda/handler_backend.cuh).

#include "ferry/worker/cuda/handler_backend.cuh"
#include "ferry/worker/handlers.h"

FERRY_CUDA_HANDLER(ferry::worker::Reverse);
FERRY_CUDA_HANDLER(ferry::worker::Echo);
FERRY_CUDA_HANDLER(ferry::worker::MacSwap);
FERRY_CUDA_HANDLER(ferry::worker::StallOnMarker);
