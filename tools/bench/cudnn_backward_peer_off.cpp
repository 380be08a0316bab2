// The cuDNN backward peer of a flashcore-bench configured without cuDNN: every backward case
// reports it SKIPPED with this reason (as cudnn_peer_off.cpp does for the forward).
#include "cudnn_backward_peer.hpp"

namespace flashcore::bench {

struct CudnnSdpaBackward::State {};

CudnnSdpaBackward::CudnnSdpaBackward() : state_(std::make_unique<State>()) {}
CudnnSdpaBackward::~CudnnSdpaBackward() = default;

bool CudnnSdpaBackward::build(const BackwardData&, cudaStream_t, std::string* error) {
  *error =
      "this flashcore-bench was configured without cuDNN (libcudnn, cudnn.h or the cuDNN "
      "frontend headers not found); install cuDNN 9 and reconfigure to measure the cuDNN peer";
  return false;
}

bool CudnnSdpaBackward::run(const BackwardData&, int, std::string* error) {
  *error = "built without cuDNN";
  return false;
}

}  // namespace flashcore::bench
