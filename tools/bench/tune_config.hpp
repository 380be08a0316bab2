// The tuner's search space: one candidate is a point of the sm90 kernel's compile-time knobs
// (src/sm90/kernel_traits.hpp, TileConfig, plus the cluster size and the schedule switches of
// fwd_kernel.cuh's Variant). Validation rejects before any compile what the kernel cannot honour:
// shared memory over one CTA's 227 KiB, register budgets setmaxnreg cannot grant, key tiles wgmma
// or the TMA multicast cannot split. Pure CPU code.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "json.hpp"

namespace flashcore::bench {

struct TuneConfig {
  int block_n = 128;             // key tile (TileConfig::kBlockN)
  int stages = 2;                // depth of the K and V rings (TileConfig::kStages)
  int consumer_warpgroups = 2;   // 64 query rows each: the query tile is 64 x this
  int consumer_registers = 240;  // setmaxnreg of each consumer thread
  int cluster_ctas = 2;          // CTAs sharing K/V by TMA multicast on unmasked problems
  bool pingpong = true;          // consumer warpgroups take turns issuing GEMMs
  bool intra_overlap = true;     // next S GEMM issued with this block's P V

  int block_m() const { return 64 * consumer_warpgroups; }
  // Stable name, e.g. "n128_s2_wg2_r240_c2_pp1_ov1": the leaderboard's key.
  std::string key() const;
  bool operator==(const TuneConfig& o) const { return key() == o.key(); }
};

// key()'s inverse; false when the text is not a key.
bool parse_key(const std::string& key, TuneConfig* config);

// The tile table's configuration at a head dim (src/sm90/tile_table.hpp).
TuneConfig default_config(int head_dim);

// The configuration this build's library runs at (head dim, dtype "fp16"/"bf16"): the tile
// table's, unless a reviewed row of the tuned table replaces it (src/sm90/tuned_tiles.hpp, the
// same header the library is compiled with). The incumbent every tuning run starts from.
TuneConfig production_config(int head_dim, const std::string& dtype);

// Bytes of shared memory KernelTraits<.., Config>::SharedStorage takes (Q ring, K and V rings,
// barriers), mirroring its layout and its choice of one or two Q stages.
int64_t smem_bytes(const TuneConfig& config, int head_dim, int element_bytes);

// Why the kernel cannot honour the config at this head dim, or "" when it can.
std::string invalid_reason(const TuneConfig& config, int head_dim, int element_bytes);

// Each knob's values. A random or mutated config draws from these and is then validated.
struct TuneSpace {
  std::vector<int> block_n{64, 80, 96, 112, 128, 144, 160, 176, 192};
  std::vector<int> stages{2, 3, 4};
  std::vector<int> consumer_warpgroups{2, 3};
  std::vector<int> register_offsets{0, 8, 16, 24};  // below the most setmaxnreg can grant
  std::vector<int> cluster_ctas{1, 2, 4};
};

// Largest setmaxnreg value the consumers can take: 24 + n * r <= 512 registers per thread slot
// of the CTA's four-warp groups, a multiple of 8, at most 256.
int max_consumer_registers(int consumer_warpgroups);

// One knob of the parent changed (the register budget follows a change of consumer warpgroups).
TuneConfig mutate(const TuneConfig& parent, const TuneSpace& space, std::mt19937_64* rng);
// Each knob from one parent or the other.
TuneConfig crossover(const TuneConfig& a, const TuneConfig& b, std::mt19937_64* rng);
// A uniformly drawn point of the space (valid or not).
TuneConfig random_config(const TuneSpace& space, std::mt19937_64* rng);

Json to_json(const TuneConfig& config);
// Fails with a message naming the member that is missing or mistyped.
bool from_json(const Json& json, TuneConfig* config, std::string* error);

}  // namespace flashcore::bench
