// One line builds Ferry's persistent, burst, graph and memops kernels for Upper.
#include "ferry/worker/cuda/handler_backend.cuh"
#include "upper.h"

FERRY_CUDA_HANDLER(Upper);
