// What cudnn_ops.cu (the legacy API) and cudnn_graph.cu (the backend API)
// share: checked calls, the per-thread handle, types, and the workspace
// bound.
#pragma once

#include <cudnn.h>

#include <cstddef>

#include "runtime/dtype.h"
#include "runtime/execution_context.h"

namespace ddp::cuda {

// A failed cuDNN call is fatal, naming the call and its place.
void CheckCudnn(cudnnStatus_t status, const char* call, const char* file, int line);
#define CUDNN_CALL(call) ::ddp::cuda::CheckCudnn((call), #call, __FILE__, __LINE__)

// One handle per thread and device, pointed at the context's stream.
cudnnHandle_t CudnnHandle(const ExecutionContext& ctx);

// f32, bf16 or f16; anything else is fatal.
cudnnDataType_t CudnnType(DType dtype);

// The scratch slot of library workspaces (ops own those below 8).
constexpr int kCudnnWorkspaceSlot = ExecutionContext::kLibraryWorkspaceSlot;

// The most workspace a convolution algorithm may take: 1 GiB, or an eighth
// of --device-memory-limit where that is less. A function of the flags
// only, not of the memory free when a shape is first met, so every run
// (and every rank) chooses among the same algorithms.
size_t WorkspaceLimit(const ExecutionContext& ctx);

// What an algorithm search may take now: WorkspaceLimit, or under
// --device-memory-limit at most half of what is left below it. A search
// meets a shape first with the step's activations live (a backward's at
// their peak), and its timing buffer comes on top of them: capped, it
// searches among fewer algorithms rather than running out of memory.
// Deterministic runs choose as every run does, whatever is free:
// WorkspaceLimit. The memory planner counts WorkspaceLimit for the chosen
// algorithms' slot.
size_t SearchWorkspaceLimit(const ExecutionContext& ctx);

}  // namespace ddp::cuda
