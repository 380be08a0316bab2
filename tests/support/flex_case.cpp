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

// A contiguous [rows, heads, D] tensor of normal values rounded to the dtype: values for the
// reference, bits for the device.
struct Tensor {
  std::vector<double> values;
  DeviceBuffer device;
};
Tensor random_tensor(int64_t rows, int64_t heads, int64_t head_dim, DType dtype,
                     std::mt19937_64* rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  const size_t n = static_cast<size_t>(rows * heads * head_dim);
  std::vector<uint16_t> bits(n);
  Tensor t;
  t.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = to_bits(normal(*rng), dtype);
    t.values[i] = from_bits(bits[i], dtype);
  }
  t.device = upload(bits);
  return t;
}

// [batch, seqlen] document ids: runs of random lengths 1 .. 2 * span, ids increasing per row.
std::vector<int32_t> document_ids(int64_t batch, int64_t seqlen, int64_t span,
                                  std::mt19937_64* rng) {
  std::uniform_int_distribution<int64_t> length(1, 2 * span);
  std::vector<int32_t> ids(static_cast<size_t>(batch * seqlen));
  for (int64_t b = 0; b < batch; ++b) {
    int32_t id = 0;
    for (int64_t i = 0; i < seqlen;) {
      const int64_t end = std::min(seqlen, i + length(*rng));
      for (; i < end; ++i) ids[static_cast<size_t>(b * seqlen + i)] = id;
      ++id;
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

void run_flex_case(const FlexCase& c, FlexResult* result) {
  *result = FlexResult{};
  const uint64_t seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  SCOPED_TRACE(c.name + ", seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const bool varlen = !c.lengths_q.empty();
  const int64_t batch = varlen ? static_cast<int64_t>(c.lengths_q.size()) : c.batch;
  std::vector<int32_t> cu_q(1, 0), cu_k(1, 0);
  for (size_t b = 0; varlen && b < c.lengths_q.size(); ++b) {
    cu_q.push_back(cu_q.back() + c.lengths_q[b]);
    cu_k.push_back(cu_k.back() + c.lengths_k[b]);
  }
  const int64_t rows_q = varlen ? cu_q.back() : batch * c.seqlen_q;
  const int64_t rows_k = varlen ? cu_k.back() : batch * c.seqlen_k;
  const int64_t seqlen_q = varlen ? cu_q.back() : c.seqlen_q;
  const int64_t seqlen_k = varlen ? cu_k.back() : c.seqlen_k;
  const int64_t D = c.head_dim;

  Tensor q = random_tensor(rows_q, c.heads_q, D, c.dtype, &rng);
  Tensor k = random_tensor(rows_k, c.heads_kv, D, c.dtype, &rng);
  Tensor v = random_tensor(rows_k, c.heads_kv, D, c.dtype, &rng);
  DeviceBuffer o(static_cast<size_t>(rows_q * c.heads_q * D) * sizeof(uint16_t));
  DeviceBuffer lse(static_cast<size_t>(rows_q * c.heads_q) * sizeof(float));
  ASSERT_EQ(cudaMemset(o.get(), 0xff, o.bytes()), cudaSuccess);      // NaN bits
  ASSERT_EQ(cudaMemset(lse.get(), 0xff, lse.bytes()), cudaSuccess);  // NaN floats

  // Mod data, host and device.
  std::vector<int32_t> doc_q, doc_k, prefixes;
  std::vector<float> slopes, bias, sinks;
  std::normal_distribution<float> normal(0.f, 1.f);
  if (c.doc_span > 0) {
    doc_q = document_ids(batch, c.seqlen_q, c.doc_span, &rng);
    if (c.seqlen_q == c.seqlen_k) {
      doc_k = doc_q;  // self-attention
    } else {
      // Keys' documents of their own, ids from 1: the queries of document 0 see no key at all.
      doc_k = document_ids(batch, c.seqlen_k, c.doc_span, &rng);
      for (int32_t& id : doc_k) ++id;
    }
  }
  if (c.prefix >= 0) {
    std::uniform_int_distribution<int32_t> length(0, static_cast<int32_t>(c.prefix));
    for (int64_t b = 0; b < batch; ++b) prefixes.push_back(length(rng));
  }
  for (int64_t h = 0; c.alibi && h < c.heads_q; ++h) {
    slopes.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(c.heads_q)));
  }
  for (int64_t i = 0; i < c.heads_q * (2 * c.bias_distance - 1) && c.bias_distance > 0; ++i) {
    bias.push_back(normal(rng));
  }
  for (int64_t h = 0; c.sinks && h < c.heads_q; ++h) sinks.push_back(2.f * normal(rng));
  const DeviceBuffer d_doc_q = upload(doc_q), d_doc_k = upload(doc_k),
                     d_prefixes = upload(prefixes), d_slopes = upload(slopes),
                     d_bias = upload(bias), d_sinks = upload(sinks), d_cu_q = upload(cu_q),
                     d_cu_k = upload(cu_k);
  const ModArrays host{doc_q.data(),  doc_k.data(), prefixes.data(),
                       slopes.data(), bias.data(),  sinks.data()};
  const ModArrays device{
      static_cast<const int32_t*>(d_doc_q.get()),    static_cast<const int32_t*>(d_doc_k.get()),
      static_cast<const int32_t*>(d_prefixes.get()), static_cast<const float*>(d_slopes.get()),
      static_cast<const float*>(d_bias.get()),       static_cast<const float*>(d_sinks.get())};

  // The reference's mask is the kernel's: the window ANDed into the built-in mask.
  flex::BuiltinMask host_mask = make_mask(c, host);
  host_mask.window = {seqlen_q, seqlen_k, c.window_left, c.causal ? 0 : c.window_right};
  flex::BuiltinScoreMod host_score = make_score_mod(c, host);
  host_score.softcap.cap = c.softcap;

  flex::HostBlockMask host_blocks;
  DeviceBuffer d_counts, d_indices, d_full_counts, d_full_indices;
  flex::BlockMask device_blocks;
  if (c.block_mask != BlockMaskKind::kNone) {
    const flex::BlockMask shape =
        flex::block_mask_shape(batch, c.heads_q, seqlen_q, seqlen_k, c.q_block, c.kv_block);
    host_blocks = c.block_mask == BlockMaskKind::kFromMask
                      ? flex::build_block_mask_host(host_mask, shape)
                      : random_block_mask(shape, &rng);
    d_counts = upload(host_blocks.kv_num_blocks);
    d_indices = upload(host_blocks.kv_indices);
    d_full_counts = upload(host_blocks.full_kv_num_blocks);
    d_full_indices = upload(host_blocks.full_kv_indices);
    device_blocks = shape;
    device_blocks.kv_num_blocks = static_cast<const int32_t*>(d_counts.get());
    device_blocks.kv_indices = static_cast<const int32_t*>(d_indices.get());
    device_blocks.full_kv_num_blocks = static_cast<const int32_t*>(d_full_counts.get());
    device_blocks.full_kv_indices = static_cast<const int32_t*>(d_full_indices.get());
  }

  AttentionParams p;
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = D;
  p.q = {q.device.get(), c.dtype, bshd_strides(varlen ? rows_q : seqlen_q, c.heads_q, D)};
  p.k = {k.device.get(), c.dtype, bshd_strides(varlen ? rows_k : seqlen_k, c.heads_kv, D)};
  p.v = {v.device.get(), c.dtype, bshd_strides(varlen ? rows_k : seqlen_k, c.heads_kv, D)};
  p.o = {o.get(), c.dtype, bshd_strides(varlen ? rows_q : seqlen_q, c.heads_q, D)};
  p.lse = static_cast<float*>(lse.get());
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.backend = c.backend;
  if (varlen) {
    p.cu_seqlens_q = static_cast<const int32_t*>(d_cu_q.get());
    p.cu_seqlens_k = static_cast<const int32_t*>(d_cu_k.get());
    p.max_seqlen_q = std::max(1, *std::max_element(c.lengths_q.begin(), c.lengths_q.end()));
    p.max_seqlen_k = std::max(1, *std::max_element(c.lengths_k.begin(), c.lengths_k.end()));
  }
  p.flex.mask = make_mask(c, device);
  p.flex.score_mod = make_score_mod(c, device);
  if (c.sinks) p.flex.sinks.logits = device.sinks;
  p.flex.block_mask = device_blocks;

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

  reference::FlexReferenceProblem rp;
  rp.batch = batch;
  rp.seqlen_q = seqlen_q;
  rp.seqlen_k = seqlen_k;
  rp.heads_q = c.heads_q;
  rp.heads_kv = c.heads_kv;
  rp.head_dim = D;
  if (varlen) {
    rp.cu_seqlens_q = cu_q.data();
    rp.cu_seqlens_k = cu_k.data();
  }
  if (c.sinks) rp.sinks.logits = sinks.data();
  const flex::BlockMask host_view = host_blocks.view();
  if (c.block_mask != BlockMaskKind::kNone) rp.block_mask = &host_view;
  std::vector<double> ref_o, ref_lse;
  const Status rs = reference::cpu_flex_attention(rp, q.values, k.values, v.values, host_mask,
                                                  host_score, &ref_o, &ref_lse);
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
      if (std::isinf(ref) && ref < 0) {
        ++result->masked_rows;
        bool zero = got == -std::numeric_limits<float>::infinity();
        for (int64_t d = 0; d < D; ++d) {
          zero &= out_o[static_cast<size_t>((r * c.heads_q + h) * D + d)] == 0.0;
        }
        if (!zero) ++result->masked_row_errors;
        continue;
      }
      result->lse_max_abs = std::max(result->lse_max_abs, std::abs(static_cast<double>(got) - ref));
    }
  }
}

}  // namespace flashcore::testing
