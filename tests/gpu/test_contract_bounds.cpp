// Device arrays that break their contract never make a kernel touch memory outside its tensors.
//
// run() and run_backward() do not read cu_seqlens or a BlockMask's arrays before they launch (that
// would cost a copy and a synchronization; check_varlen_on_device and
// check_block_mask_contents_on_device do it on request), so the kernels clamp what they read:
// sequences into the packed tensors and the grid (common/flex_sequence.hpp, sm80::bwd_sequence),
// BlockMask counts into their rows (detail::listed_blocks), and a listed block outside the keys
// is skipped (KvTileWalk::at; the sm90 merged walks drop it). Here every output lies between two
// guard regions of a known byte; each hostile array runs on every kernel that reads it (the sm90
// dense forward with and without its tile list, the sm90 and sm80 flex forwards, both backwards,
// deterministic or not), and the call must succeed, the device must report no error, and the
// guards must hold their byte. The numbers such input gives are not checked: they are wrong by
// definition. compute-sanitizer's memcheck over this file also finds reads out of bounds.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/pruning.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/backward.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

constexpr unsigned char kGuardByte = 0xA5;
constexpr size_t kGuardBytes = size_t{1} << 20;  // past the furthest row the cases below name

// A device allocation of payload bytes between two guard regions of kGuardByte.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t payload) : payload_(payload), buffer_(payload + 2 * kGuardBytes) {
    EXPECT_EQ(buffer_.status(), cudaSuccess);
    EXPECT_EQ(cudaMemset(buffer_.get(), kGuardByte, buffer_.bytes()), cudaSuccess);
  }
  void* get() const { return static_cast<unsigned char*>(buffer_.get()) + kGuardBytes; }
  // Fresh random fp16/bf16 values in [-2, 2) over the payload.
  void fill_random(DType dtype, std::mt19937_64* rng) const {
    std::uniform_real_distribution<float> value(-2.f, 2.f);
    std::vector<uint16_t> host(payload_ / sizeof(uint16_t));
    for (uint16_t& bits : host) bits = to_bits(value(*rng), dtype);
    EXPECT_EQ(
        cudaMemcpy(get(), host.data(), host.size() * sizeof(uint16_t), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  void fill_floats(float x) const {
    std::vector<float> host(payload_ / sizeof(float), x);
    EXPECT_EQ(cudaMemcpy(get(), host.data(), payload_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  // Bytes of the two guard regions that no longer hold kGuardByte.
  size_t guard_bytes_changed() const {
    std::vector<unsigned char> host(buffer_.bytes());
    EXPECT_EQ(cudaMemcpy(host.data(), buffer_.get(), host.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    size_t changed = 0;
    for (size_t i = 0; i < kGuardBytes; ++i) {
      changed += host[i] != kGuardByte;
      changed += host[kGuardBytes + payload_ + i] != kGuardByte;
    }
    return changed;
  }

 private:
  size_t payload_;
  DeviceBuffer buffer_;
};

GuardedBuffer int_array(const std::vector<int32_t>& values) {
  GuardedBuffer b(values.size() * sizeof(int32_t));
  EXPECT_EQ(
      cudaMemcpy(b.get(), values.data(), values.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
      cudaSuccess);
  return b;
}

// A varlen batch whose cu_seqlens break the contract of flashcore/varlen.hpp in one way each.
struct HostileVarlen {
  const char* name;
  int64_t total_q, total_k, max_q, max_k;
  std::vector<int32_t> cu_q, cu_k;
};

std::vector<HostileVarlen> hostile_varlen_batches() {
  return {
      // Offsets past the packed totals: sequence 2 starts 500 rows past the last query row.
      {"past_the_total", 300, 333, 200, 300, {0, 100, 250, 800, 1000}, {0, 120, 833, 900, 1100}},
      // Negative first offsets: rows before the tensors' starts.
      {"negative", 300, 333, 200, 200, {-150, 50, 120, 200, 300}, {-90, 40, 150, 250, 333}},
      // Decreasing: sequence 1 has a negative length, sequence 2 overlaps sequence 1.
      {"decreasing", 300, 333, 200, 200, {0, 200, 60, 250, 300}, {0, 250, 30, 300, 333}},
      // Sequences longer than max_seqlen (which sizes the grid): the backward's deterministic dQ
      // would wait for key blocks the grid does not have.
      {"longer_than_max", 300, 333, 64, 64, {0, 10, 290, 295, 300}, {0, 20, 320, 330, 333}},
      // Every query sequence looks as long as the longest (batch * max_q == total_q), so the sm90
      // forward runs its grid without a tile list, and one starts past the total.
      {"uniform_past_the_total", 256, 256, 64, 64, {0, 64, 500, 540, 256}, {0, 64, 128, 900, 256}},
  };
}

struct ForwardPath {
  const char* name;
  Backend backend;
  bool prefix_lm;  // a mask_mod, so that the flex kernel runs the batch
};

bool backend_runs_here(Backend backend) { return backend != Backend::kSm90 || on_sm90(); }

struct VarlenTensors {
  GuardedBuffer cu_q, cu_k, q, k, v, o, lse;
};

constexpr int64_t kHeadsQ = 4, kHeadsKv = 2;  // GQA: the kernels' head groups read cu_seqlens too

VarlenTensors varlen_tensors(const HostileVarlen& c, int64_t head_dim, DType dtype,
                             std::mt19937_64* rng) {
  const size_t q_bytes = c.total_q * kHeadsQ * head_dim * 2,
               k_bytes = c.total_k * kHeadsKv * head_dim * 2;
  VarlenTensors t{int_array(c.cu_q),
                  int_array(c.cu_k),
                  GuardedBuffer(q_bytes),
                  GuardedBuffer(k_bytes),
                  GuardedBuffer(k_bytes),
                  GuardedBuffer(q_bytes),
                  GuardedBuffer(c.total_q * kHeadsQ * sizeof(float))};
  t.q.fill_random(dtype, rng);
  t.k.fill_random(dtype, rng);
  t.v.fill_random(dtype, rng);
  return t;
}

// The sizes and arrays of a varlen batch, in AttentionParams or BackwardParams (same names).
template <typename Params>
void set_varlen(const HostileVarlen& c, const VarlenTensors& t, int64_t head_dim, Params* p) {
  p->batch = static_cast<int64_t>(c.cu_q.size()) - 1;
  p->seqlen_q = c.total_q;
  p->seqlen_k = c.total_k;
  p->heads_q = kHeadsQ;
  p->heads_kv = kHeadsKv;
  p->head_dim = head_dim;
  p->cu_seqlens_q = static_cast<const int32_t*>(t.cu_q.get());
  p->cu_seqlens_k = static_cast<const int32_t*>(t.cu_k.get());
  p->max_seqlen_q = c.max_q;
  p->max_seqlen_k = c.max_k;
}

// Q, K, V and O, bf16, in AttentionParams or BackwardParams (same names).
template <typename Params>
void set_qkvo(void* q, void* k, void* v, void* o, const Strides& qs, const Strides& ks, Params* p) {
  p->q = {q, DType::kBFloat16, qs};
  p->k = {k, DType::kBFloat16, ks};
  p->v = {v, DType::kBFloat16, ks};
  p->o = {o, DType::kBFloat16, qs};
}

std::mt19937_64 fresh_rng() {
  const uint64_t seed = std::random_device{}();
  std::printf("[ seed     ] %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

TEST(ContractBounds, HostileCuSeqlensStayInsideEveryForwardTensor) {
  FLASHCORE_REQUIRE_GPU();
  std::mt19937_64 rng = fresh_rng();
  const ForwardPath paths[] = {{"sm90 dense", Backend::kSm90, false},
                               {"sm90 flex", Backend::kSm90, true},
                               {"sm80 flex", Backend::kSm80, false},
                               {"sm80 flex with a mask_mod", Backend::kSm80, true}};
  int ran = 0;
  for (const HostileVarlen& c : hostile_varlen_batches()) {
    for (int64_t head_dim : {64, 128}) {
      if (detail::pruned_reason(DType::kBFloat16, static_cast<int>(head_dim))[0] != '\0') continue;
      for (const ForwardPath& path : paths) {
        if (!backend_runs_here(path.backend)) continue;
        SCOPED_TRACE(std::string(c.name) + ", hd" + std::to_string(head_dim) + ", " + path.name);
        const VarlenTensors t = varlen_tensors(c, head_dim, DType::kBFloat16, &rng);
        AttentionParams p;
        set_varlen(c, t, head_dim, &p);
        set_qkvo(t.q.get(), t.k.get(), t.v.get(), t.o.get(),
                 bshd_strides(c.total_q, kHeadsQ, head_dim),
                 bshd_strides(c.total_k, kHeadsKv, head_dim), &p);
        p.lse = static_cast<float*>(t.lse.get());
        p.causal = !path.prefix_lm;
        p.backend = path.backend;
        if (path.prefix_lm) {
          p.flex.mask.use_prefix_lm = true;
          p.flex.mask.prefix_lm.prefix_length = 8;
        }
        RunInfo info;
        const Status s = run(p, &info);
        ASSERT_TRUE(s.ok()) << s.message;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(t.o.guard_bytes_changed(), 0u)
            << "O was written out of bounds by " << info.provider;
        EXPECT_EQ(t.lse.guard_bytes_changed(), 0u)
            << "LSE was written out of bounds by " << info.provider;
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "this build has no bf16 hd64 or hd128 kernels";
}

TEST(ContractBounds, HostileCuSeqlensStayInsideEveryGradient) {
  FLASHCORE_REQUIRE_GPU();
  std::mt19937_64 rng = fresh_rng();
  int ran = 0;
  for (const HostileVarlen& c : hostile_varlen_batches()) {
    for (int64_t head_dim : {64, 128}) {
      if (detail::pruned_reason(DType::kBFloat16, static_cast<int>(head_dim))[0] != '\0') continue;
      for (Backend backend : {Backend::kSm90, Backend::kSm80}) {
        if (!backend_runs_here(backend)) continue;
        for (bool deterministic : {false, true}) {
          SCOPED_TRACE(std::string(c.name) + ", hd" + std::to_string(head_dim) + ", " +
                       backend_name(backend) + (deterministic ? ", deterministic" : ""));
          const VarlenTensors t = varlen_tensors(c, head_dim, DType::kBFloat16, &rng);
          const size_t q_bytes = c.total_q * kHeadsQ * head_dim * 2;
          const size_t k_bytes = c.total_k * kHeadsKv * head_dim * 2;
          GuardedBuffer d_o(q_bytes), dq(q_bytes), dk(k_bytes), dv(k_bytes);
          t.o.fill_random(DType::kBFloat16, &rng);
          d_o.fill_random(DType::kBFloat16, &rng);
          t.lse.fill_floats(4.f);  // finite: exp(score - LSE) stays in range
          BackwardParams p;
          set_varlen(c, t, head_dim, &p);
          const Strides qs = bshd_strides(c.total_q, kHeadsQ, head_dim);
          const Strides ks = bshd_strides(c.total_k, kHeadsKv, head_dim);
          set_qkvo(t.q.get(), t.k.get(), t.v.get(), t.o.get(), qs, ks, &p);
          p.d_o = {d_o.get(), DType::kBFloat16, qs};
          p.lse = static_cast<const float*>(t.lse.get());
          p.dq = {dq.get(), DType::kBFloat16, qs};
          p.dk = {dk.get(), DType::kBFloat16, ks};
          p.dv = {dv.get(), DType::kBFloat16, ks};
          p.causal = true;
          p.deterministic = deterministic;
          p.backend = backend;
          const Status s = run_backward(p, nullptr, 0, nullptr);
          ASSERT_TRUE(s.ok()) << s.message;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          EXPECT_EQ(dq.guard_bytes_changed(), 0u) << "dQ was written out of bounds";
          EXPECT_EQ(dk.guard_bytes_changed(), 0u) << "dK was written out of bounds";
          EXPECT_EQ(dv.guard_bytes_changed(), 0u) << "dV was written out of bounds";
          ++ran;
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "this build has no bf16 hd64 or hd128 kernels";
}

// BlockMasks over [1, kHeadsQ] x 256 x 256 in 128-key blocks: counts [kHeadsQ, 2], indices
// [kHeadsQ, 2, 2], as the tests below break them.
constexpr int64_t kMaskSeqlen = 256, kMaskBlock = 128, kMaskBlocks = kMaskSeqlen / kMaskBlock;

// Runs the BlockMask of counts and indices (with a documents mask_mod, every key in the query's
// document, when documents is set: partial blocks then read doc_ids at each key) on every kernel
// that walks a BlockMask: the sm90 and sm80 flex forwards and the sm80 backward, deterministic or
// not. Each call must succeed with no device error and no byte written past an output.
void expect_block_mask_stays_inside(const std::vector<int32_t>& counts,
                                    const std::vector<int32_t>& indices, bool documents) {
  std::mt19937_64 rng = fresh_rng();
  constexpr int64_t kHeadDim = 64;
  if (detail::pruned_reason(DType::kBFloat16, kHeadDim)[0] != '\0') {
    GTEST_SKIP() << "this build has no bf16 hd64 kernels";
  }
  const GuardedBuffer num_blocks = int_array(counts), kv_indices = int_array(indices);
  const GuardedBuffer doc_ids = int_array(std::vector<int32_t>(kMaskSeqlen, 0));
  const size_t q_bytes = kMaskSeqlen * kHeadsQ * kHeadDim * 2,
               k_bytes = kMaskSeqlen * kHeadsKv * kHeadDim * 2;
  GuardedBuffer q(q_bytes), k(k_bytes), v(k_bytes), o(q_bytes), d_o(q_bytes), dq(q_bytes),
      dk(k_bytes), dv(k_bytes), lse(kMaskSeqlen * kHeadsQ * sizeof(float));
  for (const GuardedBuffer* b : {&q, &k, &v, &d_o}) b->fill_random(DType::kBFloat16, &rng);
  flex::FlexOptions flex;
  flex.block_mask.batch = 1;
  flex.block_mask.heads = kHeadsQ;
  flex.block_mask.seqlen_q = flex.block_mask.seqlen_k = kMaskSeqlen;
  flex.block_mask.q_block_size = flex.block_mask.kv_block_size = kMaskBlock;
  flex.block_mask.kv_num_blocks = static_cast<const int32_t*>(num_blocks.get());
  flex.block_mask.kv_indices = static_cast<const int32_t*>(kv_indices.get());
  if (documents) {
    flex.mask.documents =
        flex::document_mask(static_cast<const int32_t*>(doc_ids.get()), kMaskSeqlen);
  }
  const Strides qs = bshd_strides(kMaskSeqlen, kHeadsQ, kHeadDim);
  const Strides ks = bshd_strides(kMaskSeqlen, kHeadsKv, kHeadDim);
  // One sequence of kMaskSeqlen rows under the mask, forward or backward.
  const auto set_problem = [&](auto* params) {
    params->batch = 1;
    params->seqlen_q = params->seqlen_k = kMaskSeqlen;
    params->heads_q = kHeadsQ;
    params->heads_kv = kHeadsKv;
    params->head_dim = kHeadDim;
    set_qkvo(q.get(), k.get(), v.get(), o.get(), qs, ks, params);
    params->flex = flex;
  };
  for (Backend backend : {Backend::kSm90, Backend::kSm80}) {
    if (!backend_runs_here(backend)) continue;
    SCOPED_TRACE(backend_name(backend));
    AttentionParams p;
    set_problem(&p);
    p.lse = static_cast<float*>(lse.get());
    p.backend = backend;
    const Status s = run(p);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(o.guard_bytes_changed(), 0u);
    EXPECT_EQ(lse.guard_bytes_changed(), 0u);
  }
  // The backward of flex problems is sm80's.
  BackwardParams b;
  set_problem(&b);
  b.d_o = {d_o.get(), DType::kBFloat16, qs};
  lse.fill_floats(4.f);
  b.lse = static_cast<const float*>(lse.get());
  b.dq = {dq.get(), DType::kBFloat16, qs};
  b.dk = {dk.get(), DType::kBFloat16, ks};
  b.dv = {dv.get(), DType::kBFloat16, ks};
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "backward, deterministic" : "backward");
    b.deterministic = deterministic;
    const Status s = run_backward(b, nullptr, 0, nullptr);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(dq.guard_bytes_changed(), 0u);
    EXPECT_EQ(dk.guard_bytes_changed(), 0u);
    EXPECT_EQ(dv.guard_bytes_changed(), 0u);
  }
}

// Every row lists blocks 0 and 1, partial.
std::vector<int32_t> every_block_listed() {
  std::vector<int32_t> indices(kHeadsQ * kMaskBlocks * kMaskBlocks);
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int32_t>(i % kMaskBlocks);
  return indices;
}

// Counts that leave their rows: one negative, one past the row's num_kv_blocks, and the last
// row's far past the end of kv_indices. Each walk must read at most its row.
TEST(ContractBounds, HostileBlockMaskCountsStayInsideTheirRows) {
  FLASHCORE_REQUIRE_GPU();
  std::vector<int32_t> counts(kHeadsQ * kMaskBlocks, 2);
  counts[1] = -5;
  counts[2] = kMaskBlocks + 3;
  counts.back() = 1 << 24;
  expect_block_mask_stays_inside(counts, every_block_listed(), /*documents=*/false);
}

// Indices outside [0, Mk) under valid counts: negative and far past the keys, in partial lists
// read with a documents mask_mod (a key outside the sequence would index doc_ids outside it).
TEST(ContractBounds, HostileBlockMaskIndicesStayInsideTheKeys) {
  FLASHCORE_REQUIRE_GPU();
  std::vector<int32_t> indices = every_block_listed();
  indices[0] = -(1 << 20);
  indices[3] = 1 << 20;
  indices[5] = kMaskBlocks;
  indices[6] = -1;
  indices[indices.size() - 1] = 1 << 30;
  expect_block_mask_stays_inside(std::vector<int32_t>(kHeadsQ * kMaskBlocks, 2), indices,
                                 /*documents=*/true);
}

}  // namespace
}  // namespace flashcore::testing
