#include "tests/support/flex_case.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "flashcore/flex.hpp"
#include "reference/cpu_flex_reference.hpp"
#include "reference/gpu_oracle.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::testing {
namespace {

constexpr uint16_t kPoisonBits = 0xFFFF;  // NaN in fp16 and bf16

template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer buffer(std::max<size_t>(host.size(), 1) * sizeof(T));
  EXPECT_EQ(buffer.status(), cudaSuccess);
  if (!host.empty()) {
    EXPECT_EQ(
        cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  return buffer;
}

}  // namespace

FlexTensor random_flex_tensor(int64_t rows, int64_t heads, int64_t head_dim, DType dtype,
                              std::mt19937_64* rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  const size_t n = static_cast<size_t>(rows * heads * head_dim);
  std::vector<uint16_t> bits(n);
  FlexTensor t;
  t.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = to_bits(normal(*rng), dtype);
    t.values[i] = from_bits(bits[i], dtype);
  }
  t.device = upload(bits);
  return t;
}

namespace {

// [batch, seqlen] document ids: runs of random lengths 1 .. 2 * span, ids increasing per row.
std::vector<int32_t> document_ids(int64_t batch, int64_t seqlen, int64_t span, int64_t cycle,
                                  std::mt19937_64* rng) {
  std::uniform_int_distribution<int64_t> length(1, 2 * span);
  std::vector<int32_t> ids(static_cast<size_t>(batch * seqlen));
  for (int64_t b = 0; b < batch; ++b) {
    int32_t id = 0;
    for (int64_t i = 0; i < seqlen;) {
      const int64_t end = std::min(seqlen, i + length(*rng));
      for (; i < end; ++i) ids[static_cast<size_t>(b * seqlen + i)] = id;
      id = cycle > 0 ? static_cast<int32_t>((id + 1) % cycle) : id + 1;
    }
  }
  return ids;
}

// Random block lists of a [batch, heads, Mq, Mk] BlockMask: each block absent, partial or full,
// and every fourth query block with none at all (its rows see nothing).
flex::HostBlockMask random_block_mask(const flex::BlockMask& shape, std::mt19937_64* rng) {
  flex::HostBlockMask m;
  m.shape = shape;
  const int64_t mq = shape.num_q_blocks(), mk = shape.num_kv_blocks();
  const size_t rows = static_cast<size_t>(shape.batch * shape.heads * mq);
  m.kv_num_blocks.assign(rows, 0);
  m.full_kv_num_blocks.assign(rows, 0);
  m.kv_indices.assign(rows * static_cast<size_t>(mk), 0);
  m.full_kv_indices.assign(rows * static_cast<size_t>(mk), 0);
  std::uniform_int_distribution<int> pick(0, 2);
  for (size_t row = 0; row < rows; ++row) {
    if (row % 4 == 3) continue;
    std::vector<int32_t> order(static_cast<size_t>(mk));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), *rng);  // kernels may not rely on sorted lists
    for (int32_t n : order) {
      const int kind = pick(*rng);
      if (kind == 0) continue;
      std::vector<int32_t>& counts = kind == 1 ? m.kv_num_blocks : m.full_kv_num_blocks;
      std::vector<int32_t>& indices = kind == 1 ? m.kv_indices : m.full_kv_indices;
      indices[row * static_cast<size_t>(mk) + static_cast<size_t>(counts[row]++)] = n;
    }
  }
  return m;
}

// The case's mods with pointers into one memory (host for the reference, device for the kernel).
struct ModArrays {
  const int32_t* doc_q = nullptr;
  const int32_t* doc_k = nullptr;
  const int32_t* prefixes = nullptr;
  const float* slopes = nullptr;
  const float* bias = nullptr;
  const float* sinks = nullptr;
};

flex::BuiltinMask make_mask(const FlexCase& c, const ModArrays& a) {
  flex::BuiltinMask mask;
  if (c.doc_span > 0) mask.documents = {a.doc_q, a.doc_k, c.seqlen_q, c.seqlen_k};
  if (c.prefix >= 0) {
    mask.use_prefix_lm = true;
    mask.prefix_lm.prefix_lengths = a.prefixes;
  }
  return mask;
}

flex::BuiltinScoreMod make_score_mod(const FlexCase& c, const ModArrays& a) {
  flex::BuiltinScoreMod mod;
  if (c.alibi) mod.alibi.slopes = a.slopes;
  if (c.bias_distance > 0) mod.bias = flex::relative_bias(a.bias, c.bias_distance);
  return mod;
}

}  // namespace

void make_flex_data(const FlexCase& c, std::mt19937_64* rng_ptr, FlexData* data) {
  std::mt19937_64& rng = *rng_ptr;
  FlexData& f = *data;
  f.c = c;
  f.varlen = !c.lengths_q.empty();
  const bool varlen = f.varlen;
  f.batch = varlen ? static_cast<int64_t>(c.lengths_q.size()) : c.batch;
  const int64_t batch = f.batch;
  f.cu_q.assign(1, 0);
  f.cu_k.assign(1, 0);
  for (size_t b = 0; varlen && b < c.lengths_q.size(); ++b) {
    f.cu_q.push_back(f.cu_q.back() + c.lengths_q[b]);
    f.cu_k.push_back(f.cu_k.back() + c.lengths_k[b]);
  }
  f.rows_q = varlen ? f.cu_q.back() : batch * c.seqlen_q;
  f.rows_k = varlen ? f.cu_k.back() : batch * c.seqlen_k;
  f.seqlen_q = varlen ? f.cu_q.back() : c.seqlen_q;
  f.seqlen_k = varlen ? f.cu_k.back() : c.seqlen_k;
  const int64_t rows_q = f.rows_q, rows_k = f.rows_k, seqlen_q = f.seqlen_q, seqlen_k = f.seqlen_k;
  const int64_t D = c.head_dim;

  f.q = random_flex_tensor(rows_q, c.heads_q, D, c.dtype, &rng);
  f.k = random_flex_tensor(rows_k, c.heads_kv, D, c.dtype, &rng);
  f.v = random_flex_tensor(rows_k, c.heads_kv, D, c.dtype, &rng);

  // Mod data, host and device.
  std::normal_distribution<float> normal(0.f, 1.f);
  if (c.doc_span > 0) {
    f.doc_q = document_ids(batch, c.seqlen_q, c.doc_span, c.doc_id_cycle, &rng);
    if (c.seqlen_q == c.seqlen_k) {
      f.doc_k = f.doc_q;  // self-attention
    } else {
      // Keys' documents of their own, ids from 1: the queries of document 0 see no key at all.
      f.doc_k = document_ids(batch, c.seqlen_k, c.doc_span, c.doc_id_cycle, &rng);
      for (int32_t& id : f.doc_k) ++id;
    }
  }
  if (c.prefix >= 0) {
    std::uniform_int_distribution<int32_t> length(0, static_cast<int32_t>(c.prefix));
    for (int64_t b = 0; b < batch; ++b) f.prefixes.push_back(length(rng));
  }
  for (int64_t h = 0; c.alibi && h < c.heads_q; ++h) {
    f.slopes.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(c.heads_q)));
  }
  for (int64_t i = 0; i < c.heads_q * (2 * c.bias_distance - 1) && c.bias_distance > 0; ++i) {
    f.bias.push_back(normal(rng));
  }
  for (int64_t h = 0; c.sinks && h < c.heads_q; ++h) f.sinks.push_back(2.f * normal(rng));
  f.d_doc_q = upload(f.doc_q);
  f.d_doc_k = upload(f.doc_k);
  f.d_prefixes = upload(f.prefixes);
  f.d_slopes = upload(f.slopes);
  f.d_bias = upload(f.bias);
  f.d_sinks = upload(f.sinks);
  f.d_cu_q = upload(f.cu_q);
  f.d_cu_k = upload(f.cu_k);
  const ModArrays host{f.doc_q.data(),  f.doc_k.data(), f.prefixes.data(),
                       f.slopes.data(), f.bias.data(),  f.sinks.data()};
  const ModArrays device{
      static_cast<const int32_t*>(f.d_doc_q.get()),    static_cast<const int32_t*>(f.d_doc_k.get()),
      static_cast<const int32_t*>(f.d_prefixes.get()), static_cast<const float*>(f.d_slopes.get()),
      static_cast<const float*>(f.d_bias.get()),       static_cast<const float*>(f.d_sinks.get())};

  // The reference's mask is the kernel's: the window ANDed into the built-in mask.
  f.host_mask = make_mask(c, host);
  f.host_mask.window = {seqlen_q, seqlen_k, c.window_left, c.causal ? 0 : c.window_right};
  f.host_score = make_score_mod(c, host);
  f.host_score.softcap.cap = c.softcap;

  flex::BlockMask device_blocks;
  if (c.block_mask != BlockMaskKind::kNone) {
    const flex::BlockMask shape = flex::block_mask_shape(
        batch, c.block_mask_broadcast ? 1 : c.heads_q, seqlen_q, seqlen_k, c.q_block, c.kv_block);
    f.host_blocks = c.block_mask == BlockMaskKind::kFromMask
                        ? flex::build_block_mask_host(f.host_mask, shape)
                        : random_block_mask(shape, &rng);
    f.d_counts = upload(f.host_blocks.kv_num_blocks);
    f.d_indices = upload(f.host_blocks.kv_indices);
    f.d_full_counts = upload(f.host_blocks.full_kv_num_blocks);
    f.d_full_indices = upload(f.host_blocks.full_kv_indices);
    device_blocks = shape;
    device_blocks.kv_num_blocks = static_cast<const int32_t*>(f.d_counts.get());
    device_blocks.kv_indices = static_cast<const int32_t*>(f.d_indices.get());
    device_blocks.full_kv_num_blocks = static_cast<const int32_t*>(f.d_full_counts.get());
    device_blocks.full_kv_indices = static_cast<const int32_t*>(f.d_full_indices.get());
  }

  AttentionParams& p = f.params;
  p = AttentionParams{};
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = D;
  p.q = {f.q.device.get(), c.dtype, f.q_strides()};
  p.k = {f.k.device.get(), c.dtype, f.k_strides()};
  p.v = {f.v.device.get(), c.dtype, f.k_strides()};
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.backend = c.backend;
  p.num_splits = c.num_splits;
  if (varlen) {
    p.cu_seqlens_q = static_cast<const int32_t*>(f.d_cu_q.get());
    p.cu_seqlens_k = static_cast<const int32_t*>(f.d_cu_k.get());
    p.max_seqlen_q =
        std::max({1, c.max_seqlen_q, *std::max_element(c.lengths_q.begin(), c.lengths_q.end())});
    p.max_seqlen_k = std::max(1, *std::max_element(c.lengths_k.begin(), c.lengths_k.end()));
  }
  p.flex.mask = make_mask(c, device);
  p.flex.score_mod = make_score_mod(c, device);
  if (c.sinks) p.flex.sinks.logits = device.sinks;
  p.flex.block_mask = device_blocks;
}

Strides FlexData::q_strides() const {
  return bshd_strides(varlen ? rows_q : seqlen_q, c.heads_q, c.head_dim);
}
Strides FlexData::k_strides() const {
  return bshd_strides(varlen ? rows_k : seqlen_k, c.heads_kv, c.head_dim);
}

reference::FlexReferenceProblem FlexData::reference_problem() const {
  reference::FlexReferenceProblem rp;
  rp.batch = batch;
  rp.seqlen_q = seqlen_q;
  rp.seqlen_k = seqlen_k;
  rp.heads_q = c.heads_q;
  rp.heads_kv = c.heads_kv;
  rp.head_dim = c.head_dim;
  if (varlen) {
    rp.cu_seqlens_q = cu_q.data();
    rp.cu_seqlens_k = cu_k.data();
  }
  if (c.sinks) rp.sinks.logits = sinks.data();
  return rp;
}

void run_flex_case(const FlexCase& c, FlexResult* result) {
  *result = FlexResult{};
  const uint64_t seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  SCOPED_TRACE(c.name + ", seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  FlexData data;
  make_flex_data(c, &rng, &data);
  if (::testing::Test::HasFatalFailure()) return;
  const bool varlen = data.varlen;
  const int64_t rows_q = data.rows_q, seqlen_q = data.seqlen_q, D = c.head_dim;
  DeviceBuffer o(static_cast<size_t>(rows_q * c.heads_q * D) * sizeof(uint16_t));
  DeviceBuffer lse(static_cast<size_t>(rows_q * c.heads_q) * sizeof(float));
  ASSERT_EQ(cudaMemset(o.get(), 0xff, o.bytes()), cudaSuccess);      // NaN bits
  ASSERT_EQ(cudaMemset(lse.get(), 0xff, lse.bytes()), cudaSuccess);  // NaN floats
  AttentionParams p = data.params;
  p.o = {o.get(), c.dtype, data.q_strides()};
  p.lse = static_cast<float*>(lse.get());

  // O read back as doubles: the kernel's fp16/bf16, or the oracle's fp32.
  std::vector<double> out_o(static_cast<size_t>(rows_q * c.heads_q * D));
  std::vector<float> out_lse(static_cast<size_t>(rows_q * c.heads_q));
  if (c.gpu_oracle) {
    DeviceBuffer o32(out_o.size() * sizeof(float));
    ASSERT_EQ(cudaMemset(o32.get(), 0xff, o32.bytes()), cudaSuccess);
    const Status s =
        reference::gpu_oracle(p, static_cast<float*>(o32.get()), p.lse, /*stream=*/nullptr);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    result->provider = "gpu_oracle";
    std::vector<float> o_floats(out_o.size());
    ASSERT_EQ(cudaMemcpy(o_floats.data(), o32.get(), o32.bytes(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::copy(o_floats.begin(), o_floats.end(), out_o.begin());
  } else {
    RunInfo info;
    const Status s = run(p, &info);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    result->provider = info.provider;
    std::vector<uint16_t> o_bits(out_o.size());
    ASSERT_EQ(cudaMemcpy(o_bits.data(), o.get(), o_bits.size() * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (size_t i = 0; i < o_bits.size(); ++i) out_o[i] = from_bits(o_bits[i], c.dtype);
  }
  ASSERT_EQ(cudaMemcpy(out_lse.data(), lse.get(), out_lse.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);

  reference::FlexReferenceProblem rp = data.reference_problem();
  const flex::BlockMask host_view = data.host_blocks.view();
  if (c.block_mask != BlockMaskKind::kNone) rp.block_mask = &host_view;
  std::vector<double> ref_o, ref_lse;
  const Status rs =
      reference::cpu_flex_attention(rp, data.q.values, data.k.values, data.v.values, data.host_mask,
                                    data.host_score, &ref_o, &ref_lse);
  ASSERT_TRUE(rs.ok()) << rs.message;

  double err = 0, norm = 0;
  for (size_t i = 0; i < ref_o.size(); ++i) {
    const double x = out_o[i];
    if (!std::isfinite(x)) {
      ++result->nan_count;
      continue;
    }
    err += (x - ref_o[i]) * (x - ref_o[i]);
    norm += ref_o[i] * ref_o[i];
  }
  result->rel_l2 = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
  // LSE rows and O rows: varlen LSE is [Hq, total_q], dense [B, Hq, Sq]; O is [rows, Hq, D].
  for (int64_t r = 0; r < rows_q; ++r) {
    for (int64_t h = 0; h < c.heads_q; ++h) {
      const int64_t b = varlen ? 0 : r / seqlen_q, i = varlen ? r : r % seqlen_q;
      const size_t li =
          static_cast<size_t>(varlen ? h * seqlen_q + i : (b * c.heads_q + h) * seqlen_q + i);
      const double ref = ref_lse[li];
      const float got = out_lse[li];
      if (std::isnan(got)) {
        ++result->nan_count;
        continue;
      }
      // A row that sees no key: O = 0 and LSE -inf, or with sinks LSE = the head's sink. The
      // reference's O of a row that sees a key is a weighted mean of random values, never exactly
      // 0, so with sinks an all-zero reference row is one without keys.
      bool ref_zero = true;
      for (int64_t d = 0; d < D; ++d) {
        ref_zero &= ref_o[static_cast<size_t>((r * c.heads_q + h) * D + d)] == 0.0;
      }
      const bool sees_nothing = std::isinf(ref) && ref < 0;
      if (sees_nothing || (c.sinks && ref_zero)) {
        ++result->masked_rows;
        bool written_empty = sees_nothing
                                 ? got == -std::numeric_limits<float>::infinity()
                                 : std::abs(static_cast<double>(got) - ref) <= kLseTolerance;
        for (int64_t d = 0; d < D; ++d) {
          written_empty &= out_o[static_cast<size_t>((r * c.heads_q + h) * D + d)] == 0.0;
        }
        if (!written_empty) ++result->masked_row_errors;
        if (sees_nothing) continue;
      }
      result->lse_max_abs = std::max(result->lse_max_abs, std::abs(static_cast<double>(got) - ref));
    }
  }
}

}  // namespace flashcore::testing
