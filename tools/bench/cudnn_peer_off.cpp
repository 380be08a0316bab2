// The cuDNN peer of a flashcore-bench configured without cuDNN: every case reports the peer as
// SKIPPED with this reason, and the flashcore rows are measured as usual.
#include "cudnn_peer.hpp"

namespace flashcore::bench {

struct CudnnSdpa::State {};

CudnnSdpa::CudnnSdpa() : state_(std::make_unique<State>()) {}
CudnnSdpa::~CudnnSdpa() = default;

bool CudnnSdpa::build(const CaseData&, cudaStream_t, std::string* error) {
  *error =
      "this flashcore-bench was configured without cuDNN (libcudnn, cudnn.h or the cuDNN "
      "frontend headers not found); install cuDNN 9 and reconfigure to measure the cuDNN peer";
  return false;
}

bool CudnnSdpa::run(const CaseData&, int, std::string* error) {
  *error = "built without cuDNN";
  return false;
}

}  // namespace flashcore::bench
