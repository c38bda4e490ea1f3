// An instantiated CUDA graph, destroyed with its owner.

#ifndef LLAMA_OPS_CUDA_CUDA_GRAPH_H_
#define LLAMA_OPS_CUDA_CUDA_GRAPH_H_

#include <cuda_runtime.h>

#include <utility>

namespace llama::cuda {

class GraphExec {
 public:
  explicit GraphExec(cudaGraphExec_t exec) : exec_(exec) {}
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept {
    std::swap(exec_, other.exec_);
    return *this;
  }
  ~GraphExec() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_CUDA_GRAPH_H_
