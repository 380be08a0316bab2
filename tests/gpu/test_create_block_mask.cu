// create_block_mask on the GPU against the host builder's brute force (every pair evaluated), for
// the built-in masks the library compiles and for functors of a test's own through the template:
// sequence tails (Sq, Sk not multiples of the blocks), separate Q and KV block sizes, documents
// with boundaries inside blocks. The output buffer is poisoned first, so an unwritten count or
// index cannot pass. Skips loudly without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "flashcore/flex.hpp"
#include "flashcore/flex/create_block_mask.cuh"
#include "tests/support/attention_case.hpp"

namespace flashcore::flex {
namespace {

using testing::DeviceBuffer;

// A mask_mod of the test's own: a checkerboard that depends on the head, so broadcast rows differ.
struct Checkerboard {
  int period;
  __host__ __device__ bool operator()(int, int h, int q_idx, int kv_idx) const {
    return (q_idx / period + kv_idx / period + h) % 2 == 0;
  }
};

// Host and device copies of the int32 data a mask reads (document ids, prefix lengths).
struct MaskData {
  std::vector<int32_t> doc_ids_q, doc_ids_k, prefixes;
  DeviceBuffer d_doc_q, d_doc_k, d_prefixes;
};

template <typename T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T));
  EXPECT_EQ(buffer.status(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return buffer;
}

// Runs the GPU builder for mask_on_device and compares with the host brute force of mask_on_host
// (the same mask, its pointers into host memory).
template <typename Build, typename HostMask>
void expect_gpu_matches_host(const BlockMask& shape, Build build_on_device,
                             const HostMask& mask_on_host, const std::string& what) {
  SCOPED_TRACE(what);
  const size_t bytes = block_mask_bytes(shape);
  ASSERT_GT(bytes, 0u);
  DeviceBuffer buffer(bytes);
  ASSERT_EQ(buffer.status(), cudaSuccess);
  CUDA_ASSERT_OK(cudaMemset(buffer.get(), 0xff, bytes));  // poison: every int reads -1
  BlockMask built;
  const Status s = build_on_device(buffer.get(), bytes, &built);
  ASSERT_TRUE(s.ok()) << s.message;
  CUDA_ASSERT_OK(cudaDeviceSynchronize());

  const HostBlockMask want =
      build_block_mask_host(mask_on_host, shape, TileClassification::kEveryElement);
  const BlockMaskSizes n = block_mask_sizes(shape);
  const int64_t mk = shape.num_kv_blocks();
  std::vector<int32_t> counts(n.counts), indices(n.indices), full_counts(n.counts),
      full_indices(n.indices);
  for (auto [to, from] : {std::pair{&counts, built.kv_num_blocks},
                          {&indices, built.kv_indices},
                          {&full_counts, built.full_kv_num_blocks},
                          {&full_indices, built.full_kv_indices}}) {
    CUDA_ASSERT_OK(
        cudaMemcpy(to->data(), from, to->size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  }
  ASSERT_EQ(counts, want.kv_num_blocks);
  ASSERT_EQ(full_counts, want.full_kv_num_blocks);
  for (int64_t row = 0; row < n.counts; ++row) {
    for (int32_t i = 0; i < counts[row]; ++i)
      ASSERT_EQ(indices[row * mk + i], want.kv_indices[row * mk + i]) << "row " << row;
    for (int32_t i = 0; i < full_counts[row]; ++i)
      ASSERT_EQ(full_indices[row * mk + i], want.full_kv_indices[row * mk + i]) << "row " << row;
  }
  const Status contents = check_block_mask_contents_on_device(built, nullptr);
  EXPECT_TRUE(contents.ok()) << contents.message;
}

TEST(CreateBlockMask, MatchesTheHostBuilderWithTails) {
  FLASHCORE_REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  struct Lengths {
    int64_t sq, sk;
  };
  const Lengths lengths[] = {{1, 7}, {127, 1000}, {1000, 1000}, {1000, 4097}};
  const std::pair<int64_t, int64_t> block_sizes[] = {{64, 64}, {128, 128}, {64, 128}, {128, 64}};
  constexpr int64_t kBatch = 2, kHeads = 2;
  for (const Lengths& len : lengths) {
    MaskData data;
    // Documents of kDocLength tokens, counted from the end so that with Sq != Sk they line up
    // bottom-right as causal does; 97 divides no block size, so boundaries fall inside blocks.
    constexpr int64_t kDocLength = 97;
    for (auto [ids, n] : {std::pair{&data.doc_ids_q, len.sq}, {&data.doc_ids_k, len.sk}}) {
      ids->resize(static_cast<size_t>(kBatch * n));
      for (int64_t b = 0; b < kBatch; ++b) {
        for (int64_t i = 0; i < n; ++i) {
          (*ids)[b * n + i] = static_cast<int32_t>((n - 1 - i) / kDocLength);
        }
      }
    }
    std::uniform_int_distribution<int> prefix(1, 150);
    data.prefixes = {static_cast<int32_t>(prefix(rng)), 0};  // batch 1: no prefix
    data.d_doc_q = to_device(data.doc_ids_q);
    data.d_doc_k = to_device(data.doc_ids_k);
    data.d_prefixes = to_device(data.prefixes);
    const auto* d_doc_q = static_cast<const int32_t*>(data.d_doc_q.get());
    const auto* d_doc_k = static_cast<const int32_t*>(data.d_doc_k.get());
    const auto* d_prefixes = static_cast<const int32_t*>(data.d_prefixes.get());

    struct BuiltinCase {
      const char* name;
      std::function<BuiltinMask(const int32_t*, const int32_t*, const int32_t*)> make;
    };
    const BuiltinCase builtins[] = {
        {"causal",
         [](auto, auto, auto) {
           BuiltinMask m;
           m.window = causal_mask();
           return m;
         }},
        {"window",
         [](auto, auto, auto) {
           BuiltinMask m;
           m.window = sliding_window_mask(256, 0);
           return m;
         }},
        {"documents",
         [&](const int32_t* dq, const int32_t* dk, auto) {
           BuiltinMask m;
           m.documents = {dq, dk, len.sq, len.sk};
           return m;
         }},
        {"causal_documents",
         [&](const int32_t* dq, const int32_t* dk, auto) {
           BuiltinMask m;
           m.window = causal_mask();
           m.documents = {dq, dk, len.sq, len.sk};
           return m;
         }},
        {"prefix_lm",
         [](auto, auto, const int32_t* prefixes) {
           BuiltinMask m;
           m.use_prefix_lm = true;
           m.prefix_lm.prefix_lengths = prefixes;
           return m;
         }},
    };
    for (const auto& [q_block, kv_block] : block_sizes) {
      const BlockMask shape = block_mask_shape(kBatch, 1, len.sq, len.sk, q_block, kv_block);
      const std::string where = " Sq " + std::to_string(len.sq) + " Sk " + std::to_string(len.sk) +
                                " blocks " + std::to_string(q_block) + "x" +
                                std::to_string(kv_block);
      for (const BuiltinCase& c : builtins) {
        const BuiltinMask on_device = c.make(d_doc_q, d_doc_k, d_prefixes);
        const BuiltinMask on_host =
            c.make(data.doc_ids_q.data(), data.doc_ids_k.data(), data.prefixes.data());
        expect_gpu_matches_host(
            shape,
            [&](void* buffer, size_t bytes, BlockMask* out) {
              return create_block_mask(on_device, shape, buffer, bytes, out, nullptr);
            },
            on_host, c.name + where);
      }
      // Functors of the test's own, through the template: per-head rows, and/or with built-ins.
      const BlockMask per_head =
          block_mask_shape(kBatch, kHeads, len.sq, len.sk, q_block, kv_block);
      const auto causal_board = and_masks(causal_mask(), Checkerboard{96});
      const auto window_or_board = or_masks(sliding_window_mask(100, 100), Checkerboard{200});
      expect_gpu_matches_host(
          per_head,
          [&](void* buffer, size_t bytes, BlockMask* out) {
            return create_block_mask(causal_board, per_head, buffer, bytes, out, nullptr);
          },
          causal_board, "causal AND checkerboard" + where);
      expect_gpu_matches_host(
          per_head,
          [&](void* buffer, size_t bytes, BlockMask* out) {
            return create_block_mask(window_or_board, per_head, buffer, bytes, out, nullptr);
          },
          window_or_board, "window OR checkerboard" + where);
    }
  }
}

TEST(CreateBlockMask, BadBufferFailsBeforeLaunching) {
  FLASHCORE_REQUIRE_GPU();
  const BlockMask shape = block_mask_shape(1, 1, 300, 300, 64, 64);
  DeviceBuffer buffer(block_mask_bytes(shape));
  ASSERT_EQ(buffer.status(), cudaSuccess);
  BlockMask out;
  BuiltinMask mask;
  const Status small =
      create_block_mask(mask, shape, buffer.get(), buffer.bytes() - 16, &out, nullptr);
  EXPECT_EQ(small.code, StatusCode::kInvalidArgument);
  EXPECT_NE(small.message.find("block_mask_bytes"), std::string::npos) << small.message;
  BlockMask bad_shape = shape;
  bad_shape.kv_block_size = 50;
  const Status odd =
      create_block_mask(mask, bad_shape, buffer.get(), buffer.bytes(), &out, nullptr);
  EXPECT_NE(odd.message.find("multiple of 16"), std::string::npos) << odd.message;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace flashcore::flex
