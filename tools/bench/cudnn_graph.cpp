#include "cudnn_graph.hpp"

namespace flashcore::bench::cudnn {

GraphState::~GraphState() {
  cudaFree(workspace);
  if (handle != nullptr) cudnnDestroy(handle);
}

std::shared_ptr<fe::graph::Graph> GraphState::start(const Case& c, cudaStream_t stream,
                                                    std::string* error) {
  if (handle == nullptr) {
    if (const cudnnStatus_t s = cudnnCreate(&handle); s != CUDNN_STATUS_SUCCESS) {
      *error = std::string("cudnnCreate: ") + cudnnGetErrorString(s);
      return nullptr;
    }
  }
  cudnnSetStream(handle, stream);
  const fe::DataType_t io = c.dtype == "bf16" ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  auto built = std::make_shared<fe::graph::Graph>();
  built->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return built;
}

bool GraphState::finish(std::shared_ptr<fe::graph::Graph> built, std::string* error) {
  auto check = [&](fe::error_t status, const char* step) {
    if (status.is_bad()) *error = std::string("cuDNN ") + step + ": " + status.get_message();
    return !status.is_bad();
  };
  if (!check(built->validate(), "validate") ||
      !check(built->build_operation_graph(handle), "build_operation_graph") ||
      !check(built->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") ||
      !check(built->check_support(handle), "check_support") ||
      !check(built->build_plans(handle), "build_plans")) {
    return false;
  }
  int64_t workspace_bytes = 0;
  if (!check(built->get_workspace_size(workspace_bytes), "get_workspace_size")) return false;
  cudaFree(workspace);
  workspace = nullptr;
  if (workspace_bytes > 0 &&
      cudaMalloc(&workspace, static_cast<size_t>(workspace_bytes)) != cudaSuccess) {
    cudaGetLastError();
    *error = "cannot allocate " + std::to_string(workspace_bytes) + " bytes of cuDNN workspace";
    return false;
  }
  graph = std::move(built);
  return true;
}

bool GraphState::execute(std::string* error) {
  fe::error_t status = graph->execute(handle, pack, workspace);
  if (status.is_bad()) {
    *error = "cuDNN execute: " + status.get_message();
    return false;
  }
  return true;
}

std::vector<int64_t> bshd_dims(const Case& c, int64_t seqlen, int64_t heads) {
  return {c.batch, heads, seqlen, c.head_dim};
}

std::vector<int64_t> bshd_strides(const Case& c, int64_t seqlen, int64_t heads) {
  return {seqlen * heads * c.head_dim, c.head_dim, heads * c.head_dim, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> bshd_tensor(fe::graph::Graph& graph, const char* name,
                                                          int64_t uid, const Case& c,
                                                          int64_t seqlen, int64_t heads) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(bshd_dims(c, seqlen, heads))
                          .set_stride(bshd_strides(c, seqlen, heads)));
}

}  // namespace flashcore::bench::cudnn
