// The sm90 flex kernel's merged walks (src/sm90/flex_merged_walk.hpp) against a host merge of the
// same lists, record for record: unsorted lists, a block listed twice in one list and in both lists
// of one query block, entries outside the key blocks, counts past the row, empty query blocks,
// key tails, more key units than one chunk of marks, query blocks of 64 and 192 rows, the paired
// walk (64-key blocks), the 128-key one (blocks of 256 keys), the hd256 kernel's 64-key one
// (blocks of 64 and 192 keys, unpaired), and a BlockMask broadcast over heads; and the partial
// units inside one document of a built-in document mask, marked per batch the walk serves (a
// BlockMask of batch 1 serves them all). The walk buffer is poisoned first and its bytes past the
// walks are checked untouched. The end-to-end results of the kernel on merged walks are
// test_flex_sm90.cpp's "merged_*" cases. Skips loudly without an sm_90 GPU (the builder is compiled
// for sm_90a only).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sm90/flex_merged_walk.hpp"
#include "sm90/flex_step.hpp"
#include "tests/support/attention_case.hpp"

namespace flashcore::sm90 {
namespace {

using testing::DeviceBuffer;

struct WalkCase {
  std::string name;
  int64_t batch, heads, seqlen_q, seqlen_k, q_block, kv_block;
  // > 0: a built-in document mask (self-attention ids, documents of doc_span tokens) over
  // problem_batch batches (0: batch), whose partial units inside one document the builder marks.
  int64_t doc_span = 0, problem_batch = 0;
  int tile_keys = kFlexTileKeys;  // the kernel's key tile (flex_tile_keys: 64 at D > 128)
};

// Document ids [batch, seqlen]: documents of `span` tokens, each batch's boundaries 37 tokens on
// from the previous one's, so a unit inside one document in every batch of a broadcast walk
// exists, and so does one across a boundary (the random lists decide which units are partial).
std::vector<int32_t> document_ids(int64_t batch, int64_t seqlen, int64_t span) {
  constexpr int64_t kShift = 37;
  std::vector<int32_t> ids(static_cast<size_t>(batch * seqlen));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < seqlen; ++i) {
      ids[static_cast<size_t>(b * seqlen + i)] = static_cast<int32_t>((i + kShift * b) / span);
    }
  }
  return ids;
}

// Random lists of a BlockMask: each key block absent, partial or full, in shuffled order, plus
// the oddities the builder must survive: duplicates, a block in both lists, entries outside the
// key blocks (ignored), counts larger than a row (read as the row), every fifth row empty.
struct HostLists {
  std::vector<int32_t> counts, indices, full_counts, full_indices;
};
HostLists random_lists(const flex::BlockMask& shape, std::mt19937_64* rng) {
  const int64_t mq = shape.num_q_blocks(), mk = shape.num_kv_blocks();
  const size_t rows = static_cast<size_t>(shape.batch * shape.heads * mq);
  HostLists l;
  l.counts.assign(rows, 0);
  l.full_counts.assign(rows, 0);
  l.indices.assign(rows * static_cast<size_t>(mk), 0);
  l.full_indices.assign(rows * static_cast<size_t>(mk), 0);
  std::uniform_int_distribution<int> pick(0, 5);
  for (size_t row = 0; row < rows; ++row) {
    if (row % 5 == 4) continue;
    std::vector<int32_t> order(static_cast<size_t>(mk));
    for (int32_t n = 0; n < mk; ++n) order[static_cast<size_t>(n)] = n;
    std::shuffle(order.begin(), order.end(), *rng);
    for (int32_t n : order) {
      const int kind = pick(*rng);  // 0-1 absent, 2-3 partial, 4 full, 5 an oddity
      auto push = [&](bool full, int32_t block) {
        auto& counts = full ? l.full_counts : l.counts;
        auto& indices = full ? l.full_indices : l.indices;
        if (counts[row] < mk) indices[row * static_cast<size_t>(mk) + counts[row]++] = block;
      };
      if (kind == 2 || kind == 3) push(false, n);
      if (kind == 4) push(true, n);
      if (kind == 5) {
        const int oddity = static_cast<int>(n % 4);
        if (oddity == 0) push(false, n), push(false, n);            // listed twice
        if (oddity == 1) push(false, n), push(true, n);             // partial and full: partial
        if (oddity == 2) push(true, static_cast<int32_t>(mk + n));  // past the key blocks
        if (oddity == 3) push(false, -1 - n);                       // negative
      }
    }
    if (row % 7 == 3) l.full_counts[row] = static_cast<int32_t>(mk + 5);  // past the row
  }
  return l;
}

// The walks as the builder must make them, from the host lists: each key unit's masking per
// warpgroup, the marked units last first, packed as FlexStep words (two to a step when paired).
struct HostWalks {
  std::vector<int32_t> counts;
  std::vector<std::vector<int32_t>> words;  // per walk, its steps' words in order
};
// ids: the document ids of `batch` batches of seqlen_q == seqlen_k tokens, or empty.
HostWalks host_merge(const flex::BlockMask& m, const HostLists& l, int seqlen_q, int seqlen_k,
                     int num_m_blocks, int tile_keys, const std::vector<int32_t>& ids, int batch) {
  const bool paired = needs_paired_walk(m, tile_keys);
  const int unit_keys = merged_walk_unit_keys(m, tile_keys);
  const int units = (seqlen_k + unit_keys - 1) / unit_keys;
  const int units_per_block = static_cast<int>(m.kv_block_size) / unit_keys;
  const int64_t mq = m.num_q_blocks(), mk = m.num_kv_blocks();
  HostWalks w;
  const int64_t walks = merged_walk_count(m, num_m_blocks);
  for (int64_t walk = 0; walk < walks; ++walk) {
    const int m_block = static_cast<int>(walk % num_m_blocks);
    const int64_t bh = walk / num_m_blocks;
    const int row_begin = m_block * kFlexTileRows;
    const int row_end = std::min(row_begin + kFlexTileRows, seqlen_q);
    const int first = row_begin / static_cast<int>(m.q_block_size);
    const int last = (row_end - 1) / static_cast<int>(m.q_block_size);
    std::map<int, int> marks;  // unit -> FlexStep masking bits of both warpgroups
    for (int list = 0; list <= last - first; ++list) {
      const size_t row = static_cast<size_t>(bh * mq + first + list);
      for (int full = 0; full < 2; ++full) {
        const auto& counts = full ? l.full_counts : l.counts;
        const auto& indices = full ? l.full_indices : l.indices;
        const int64_t n = std::min<int64_t>(std::max(counts[row], 0), mk);
        const int masking = full ? FlexStep::kFull : FlexStep::kPartial;
        for (int64_t j = 0; j < n; ++j) {
          for (int t = 0; t < units_per_block; ++t) {
            const int64_t u =
                int64_t{indices[row * static_cast<size_t>(mk) + j]} * units_per_block + t;
            if (u < 0 || u >= units) continue;
            marks[static_cast<int>(u)] |= last > first
                                              ? masking << (FlexStep::kMaskingBits * list)
                                              : masking | masking << FlexStep::kMaskingBits;
          }
        }
      }
    }
    std::vector<int32_t> words;
    for (auto it = marks.rbegin(); it != marks.rend(); ++it) {
      int masking[2];
      for (int wg = 0; wg < 2; ++wg) {
        masking[wg] = FlexStep::masking(it->second, wg);
        if (masking[wg] == FlexStep::kClassify) masking[wg] = FlexStep::kPartial;
      }
      const bool all = masking[0] == FlexStep::kFull && masking[1] == FlexStep::kFull &&
                       row_begin + kFlexTileRows <= seqlen_q &&
                       (it->first + 1) * unit_keys <= seqlen_k;
      int word = FlexStep::pack(it->first, masking[0], masking[1], all);
      // A partial unit whose rows and keys carry one id in every batch the walk serves.
      bool one =
          !ids.empty() && (masking[0] == FlexStep::kPartial || masking[1] == FlexStep::kPartial);
      const int b_begin = m.batch == 1 ? 0 : static_cast<int>(bh / m.heads);
      const int b_end = m.batch == 1 ? batch : b_begin + 1;
      for (int b = b_begin; b < b_end && one; ++b) {
        const int32_t id = ids[static_cast<size_t>(b) * seqlen_q + row_begin];
        const auto same = [&](int i) { return ids[static_cast<size_t>(b) * seqlen_q + i] == id; };
        for (int q = row_begin; q < row_end && one; ++q) one = same(q);
        const int key_end = std::min((it->first + 1) * unit_keys, seqlen_k);
        for (int k = it->first * unit_keys; k < key_end && one; ++k) one = same(k);
      }
      words.push_back(one ? FlexStep::with_one_document(word) : word);
    }
    const int marked = static_cast<int>(words.size());
    if (paired && marked % 2 != 0) {
      words.push_back(
          FlexStep::pack(past_key_block<kFlexTileKeys / 2>(seqlen_k), FlexStep::kSkip, false));
    }
    w.counts.push_back(paired ? (marked + 1) / 2 : marked);
    w.words.push_back(words);
  }
  return w;
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer buffer(std::max<size_t>(1, host.size()) * sizeof(T));
  EXPECT_EQ(buffer.status(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(buffer.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return buffer;
}

class MergedWalks : public ::testing::TestWithParam<WalkCase> {};

TEST_P(MergedWalks, MatchHostMerge) {
  FLASHCORE_REQUIRE_GPU();
  cudaDeviceProp device{};
  ASSERT_EQ(cudaGetDeviceProperties(&device, 0), cudaSuccess);
  if (device.major != 9 || device.minor != 0) {
    GTEST_SKIP() << "merged walk test skipped: the builder is sm_90a code and the GPU is sm_"
                 << device.major << device.minor;
  }
  const WalkCase& c = GetParam();
  flex::BlockMask m;
  m.batch = c.batch, m.heads = c.heads, m.seqlen_q = c.seqlen_q, m.seqlen_k = c.seqlen_k;
  m.q_block_size = c.q_block, m.kv_block_size = c.kv_block;
  std::mt19937_64 rng(std::random_device{}());
  const HostLists lists = random_lists(m, &rng);
  DeviceBuffer counts = upload(lists.counts), indices = upload(lists.indices);
  DeviceBuffer full_counts = upload(lists.full_counts), full_indices = upload(lists.full_indices);
  m.kv_num_blocks = static_cast<const int32_t*>(counts.get());
  m.kv_indices = static_cast<const int32_t*>(indices.get());
  m.full_kv_num_blocks = static_cast<const int32_t*>(full_counts.get());
  m.full_kv_indices = static_cast<const int32_t*>(full_indices.get());
  ASSERT_TRUE(needs_merged_walks(m));

  const int num_m_blocks = static_cast<int>((c.seqlen_q + kFlexTileRows - 1) / kFlexTileRows);
  const size_t bytes = merged_walk_bytes(m, c.seqlen_k, num_m_blocks, c.tile_keys);
  constexpr size_t kGuardBytes = 4096;  // must stay poisoned: nothing is written past the walks
  DeviceBuffer workspace(bytes + kGuardBytes);
  ASSERT_EQ(workspace.status(), cudaSuccess);
  CUDA_ASSERT_OK(cudaMemset(workspace.get(), 0xa5, bytes + kGuardBytes));
  const int batch = static_cast<int>(c.problem_batch > 0 ? c.problem_batch : c.batch);
  std::vector<int32_t> ids;
  flex::DocumentMask documents;
  if (c.doc_span > 0) ids = document_ids(batch, c.seqlen_q, c.doc_span);
  DeviceBuffer d_ids = upload(ids);
  if (c.doc_span > 0) {
    documents = flex::document_mask(static_cast<const int32_t*>(d_ids.get()), c.seqlen_q);
  }
  // The flex kernel's tile counter, which the build zeroes (no memset between the launches).
  DeviceBuffer tile_counter(sizeof(int));
  ASSERT_EQ(tile_counter.status(), cudaSuccess);
  CUDA_ASSERT_OK(cudaMemset(tile_counter.get(), 0xa5, sizeof(int)));
  flashcore::sm90::MergedWalks walks;
  CUDA_ASSERT_OK(build_merged_walks(
      m, static_cast<int>(c.seqlen_q), static_cast<int>(c.seqlen_k), num_m_blocks, c.tile_keys,
      documents, batch, static_cast<int*>(tile_counter.get()), workspace.get(), &walks, nullptr));
  CUDA_ASSERT_OK(cudaDeviceSynchronize());
  int counter = -1;
  CUDA_ASSERT_OK(cudaMemcpy(&counter, tile_counter.get(), sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(counter, 0) << "the build left the tile counter unzeroed";
  std::vector<unsigned char> raw(bytes + kGuardBytes);
  CUDA_ASSERT_OK(cudaMemcpy(raw.data(), workspace.get(), raw.size(), cudaMemcpyDeviceToHost));
  for (size_t i = bytes; i < raw.size(); ++i) ASSERT_EQ(raw[i], 0xa5) << "written past: byte " << i;

  const HostWalks expected =
      host_merge(m, lists, static_cast<int>(c.seqlen_q), static_cast<int>(c.seqlen_k), num_m_blocks,
                 c.tile_keys, ids, batch);
  const int words_per_step = needs_paired_walk(m, c.tile_keys) ? 2 : 1;
  const auto* counts_out = reinterpret_cast<const int32_t*>(raw.data());
  const auto* records_out =
      reinterpret_cast<const int32_t*>(raw.data() + (reinterpret_cast<const char*>(walks.records) -
                                                     static_cast<const char*>(workspace.get())));
  int64_t steps = 0, one_document = 0, partial = 0;
  for (size_t walk = 0; walk < expected.counts.size(); ++walk) {
    for (const int32_t word : expected.words[walk]) {
      one_document += FlexStep::one_document(word);
      partial += FlexStep::masking(word, 0) == FlexStep::kPartial ||
                 FlexStep::masking(word, 1) == FlexStep::kPartial;
    }
    ASSERT_EQ(counts_out[walk], expected.counts[walk]) << "walk " << walk;
    const auto& words = expected.words[walk];
    for (size_t i = 0; i < words.size(); ++i) {
      ASSERT_EQ(records_out[walk * walks.capacity * words_per_step + i], words[i])
          << "walk " << walk << " word " << i;
    }
    steps += expected.counts[walk];
  }
  EXPECT_GT(steps, 0) << "the random lists gave no step at all";
  if (c.doc_span > 0) {  // both kinds of partial unit, so the marks are tested both ways
    EXPECT_GT(one_document, 0) << "no partial unit inside one document";
    EXPECT_LT(one_document, partial) << "every partial unit inside one document";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MergedWalks,
    ::testing::Values(WalkCase{"q64_kv64_paired", 2, 3, 700, 650, 64, 64},
                      WalkCase{"q64_kv64_two_chunks_broadcast_heads", 1, 1, 300, 70000, 64, 64},
                      WalkCase{"q64_kv256_tiles", 2, 2, 500, 1300, 64, 256},
                      WalkCase{"q192_kv64_tails", 1, 2, 777, 333, 192, 64},
                      WalkCase{"q64_kv128_long_keys", 1, 2, 260, 140000, 64, 128},
                      WalkCase{"documents_q128_kv128", 2, 2, 1000, 1000, 128, 128, 300},
                      WalkCase{"documents_paired_broadcast_batch", 1, 1, 900, 900, 64, 64, 400, 3},
                      WalkCase{"documents_q64_kv256_tails", 2, 1, 777, 777, 64, 256, 500},
                      WalkCase{"tile64_q64_kv64_unpaired", 2, 2, 700, 650, 64, 64, 0, 0,
                               flex_tile_keys(256)},
                      WalkCase{"tile64_q128_kv192_long_keys", 1, 2, 300, 20000, 128, 192, 0, 0,
                               flex_tile_keys(256)},
                      WalkCase{"tile64_documents_q64_kv64_broadcast_batch", 1, 1, 900, 900, 64, 64,
                               400, 3, flex_tile_keys(256)}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace flashcore::sm90
