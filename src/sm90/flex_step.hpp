// The record of one step of the sm90 flex kernel's walk (flex_load.hpp), as the producer leaves
// it with each K stage and the consumers read it (flex_steps.hpp); the merged walks
// (flex_merged_walk.cu) are built of the same records. CuTe-free.
#pragma once

namespace flashcore::sm90 {

// What the consumers do with the key tile of one step, packed in one int that rides with the K
// stage: the tile index, each consumer warpgroup's masking of it (a BlockMask with 64-row query
// blocks lists each warpgroup's keys separately, so a step may be partial for one, full or absent
// for the other), and whether every element of it is visible to both warpgroups (a full tile
// inside both sequences): then the consumers' FlexSteps::begin reads nothing else (no tile state,
// no mask, no bounds), the common case of a step. A paired step (64-key blocks) has a second word
// for the stage's second half; its first word's tile is then the first half's 64-key block, and
// the step is all visible when both words say so. A partial step may also be known to lie inside
// one document (the merged walks' build checks the built-in document mask's ids): its consumers
// then evaluate the rest of the built-in mask and skip the documents.
struct FlexStep {
  enum Masking : int { kSkip = 0, kPartial = 1, kFull = 2, kClassify = 3 };  // kClassify: dense
  // The word: the tile, above the one-document bit, above the all-visible bit, above each
  // warpgroup's masking (wg 1 over 0).
  static constexpr int kMaskingBits = 2;
  static constexpr int kMaskingField = (1 << kMaskingBits) - 1;
  static constexpr int kAllVisibleShift = 2 * kMaskingBits;
  static constexpr int kOneDocumentShift = kAllVisibleShift + 1;
  static constexpr int kTileShift = kOneDocumentShift + 1;

  __host__ __device__ static constexpr int pack(int tile, int masking0, int masking1,
                                                bool all_visible) {
    return tile << kTileShift | static_cast<int>(all_visible) << kAllVisibleShift |
           masking1 << kMaskingBits | masking0;
  }
  // The word with its one-document bit set: every row of the tile and every key of the step
  // (inside the sequences) carry one document id, in every batch the walk serves.
  __host__ __device__ static constexpr int with_one_document(int step) {
    return step | 1 << kOneDocumentShift;
  }
  __host__ __device__ static constexpr bool one_document(int step) {
    return (step >> kOneDocumentShift) & 1;
  }
  // The same masking for both warpgroups.
  __host__ __device__ static constexpr int pack(int tile, int masking, bool all_visible) {
    return pack(tile, masking, masking, all_visible);
  }
  __host__ __device__ static constexpr int tile(int step) { return step >> kTileShift; }
  __host__ __device__ static constexpr bool all_visible(int step) {
    return (step >> kAllVisibleShift) & 1;
  }
  __host__ __device__ static constexpr int masking(int step, int warpgroup) {
    return (step >> (kMaskingBits * warpgroup)) & kMaskingField;
  }
};

// The block just past the keys: an empty half's load, which the TMA fills with zeros.
template <int kKeys>
__host__ __device__ constexpr int past_key_block(int seqlen_k) {
  return (seqlen_k + kKeys - 1) / kKeys;
}

}  // namespace flashcore::sm90
