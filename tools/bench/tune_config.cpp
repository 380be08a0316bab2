#include "tune_config.hpp"

#include <algorithm>
#include <cstdio>

#include "sm90/tuned_tiles.hpp"

namespace flashcore::bench {
namespace {

// src/sm90: tile_table.hpp (kRowsPerWarpgroup, kMaxConsumerWarpgroups), kernel_traits.hpp
// (kRegisterFile, kProducerRegisters, kSmemLimitBytes, kBarrierBytes).
constexpr int kRowsPerWarpgroup = 64;
constexpr int kMaxConsumerWarpgroups = 3;
constexpr int kWarpgroupThreads = 128;
constexpr int kRegisterFile = 65536;
constexpr int kProducerRegisters = 24;
constexpr int kMaxRegisters = 256;  // setmaxnreg's upper bound
constexpr int64_t kSmemLimitBytes = 227 * 1024;
constexpr int64_t kBarrierBytes = 1024;
constexpr int64_t kSmemAlign = 1024;  // SharedStorage aligns each ring (and itself) to 1 KiB

int64_t align_up(int64_t bytes, int64_t to) { return (bytes + to - 1) / to * to; }

// Registers per thread the CTA is launched with: the register file over its threads, rounded
// down to setmaxnreg's multiple of 8 (kernel_traits.hpp, consumer_registers_for).
int launch_registers(int consumer_warpgroups) {
  const int threads = (consumer_warpgroups + 1) * kWarpgroupThreads;
  return std::min(kRegisterFile / threads / 8 * 8, kMaxRegisters);
}

template <typename T>
T pick(const std::vector<T>& values, std::mt19937_64* rng) {
  std::uniform_int_distribution<size_t> index(0, values.size() - 1);
  return values[index(*rng)];
}

bool coin(std::mt19937_64* rng) { return std::bernoulli_distribution(0.5)(*rng); }

// The register budget as an offset below the most the consumer count allows, so that it stays
// meaningful when a mutation changes the consumer count.
int register_offset(const TuneConfig& c) {
  return std::max(0, max_consumer_registers(c.consumer_warpgroups) - c.consumer_registers);
}

}  // namespace

std::string TuneConfig::key() const {
  return "n" + std::to_string(block_n) + "_s" + std::to_string(stages) + "_wg" +
         std::to_string(consumer_warpgroups) + "_r" + std::to_string(consumer_registers) + "_c" +
         std::to_string(cluster_ctas) + "_pp" + std::to_string(pingpong ? 1 : 0) + "_ov" +
         std::to_string(intra_overlap ? 1 : 0);
}

bool parse_key(const std::string& key, TuneConfig* c) {
  int pingpong = 0, overlap = 0, consumed = 0;
  TuneConfig parsed;
  if (std::sscanf(key.c_str(), "n%d_s%d_wg%d_r%d_c%d_pp%d_ov%d%n", &parsed.block_n, &parsed.stages,
                  &parsed.consumer_warpgroups, &parsed.consumer_registers, &parsed.cluster_ctas,
                  &pingpong, &overlap, &consumed) != 7 ||
      static_cast<size_t>(consumed) != key.size() || pingpong > 1 || overlap > 1 || pingpong < 0 ||
      overlap < 0) {
    return false;
  }
  parsed.pingpong = pingpong == 1;
  parsed.intra_overlap = overlap == 1;
  *c = parsed;
  return true;
}

int max_consumer_registers(int consumer_warpgroups) {
  const int warpgroups = consumer_warpgroups + 1;
  const int most = (launch_registers(consumer_warpgroups) * warpgroups - kProducerRegisters) /
                   consumer_warpgroups;
  return std::min(most / 8 * 8, kMaxRegisters);
}

TuneConfig production_config(int head_dim, const std::string& dtype) {
  const sm90::TunedTile row = sm90::reviewed_tile(dtype == "bf16", head_dim);
  if (row.block_n == 0) return default_config(head_dim);
  // Reviewed rows run the library's schedule only (cmake/sm90_tuned_table.cmake refuses others).
  TuneConfig c;
  c.block_n = row.block_n;
  c.stages = row.stages;
  c.consumer_warpgroups = row.consumer_warpgroups;
  c.consumer_registers = row.consumer_registers;
  c.cluster_ctas = row.cluster_ctas;
  return c;
}

TuneConfig default_config(int head_dim) {
  // tile_table.hpp: consumer_warpgroups_for, block_n_for, kStages, kKVClusterCtas.
  TuneConfig c;
  c.consumer_warpgroups = head_dim <= 64 ? 3 : 2;
  c.block_n = head_dim <= 128 ? 128 : head_dim <= 192 ? 96 : 80;
  c.stages = 2;
  c.consumer_registers = max_consumer_registers(c.consumer_warpgroups);
  c.cluster_ctas = 2;
  return c;
}

int64_t smem_bytes(const TuneConfig& c, int head_dim, int element_bytes) {
  const int64_t q_tile = int64_t{c.block_m()} * head_dim * element_bytes;
  const int64_t kv_tile = int64_t{c.block_n} * head_dim * element_bytes;
  const int q_stages =
      2 * q_tile + 2 * c.stages * kv_tile + kBarrierBytes <= kSmemLimitBytes ? 2 : 1;
  const int64_t rings =
      align_up(q_stages * q_tile, kSmemAlign) + 2 * align_up(c.stages * kv_tile, kSmemAlign);
  return align_up(rings + kBarrierBytes, kSmemAlign);
}

std::string invalid_reason(const TuneConfig& c, int head_dim, int element_bytes) {
  if (head_dim % 32 != 0 || head_dim > 256) return "head dim must be a multiple of 32 up to 256";
  if (c.block_n < 16 || c.block_n > 256 || c.block_n % 16 != 0) {
    return "key tile " + std::to_string(c.block_n) +
           " is not a multiple of 16 in [16, 256] (wgmma's N, and the K of the P V GEMM)";
  }
  if (c.stages < 2 || c.stages > 8) return "stages must be 2..8";
  if (c.consumer_warpgroups < 1 || c.consumer_warpgroups > kMaxConsumerWarpgroups) {
    return "consumer warpgroups must be 1..3 (the named barriers are laid out for 3)";
  }
  if (c.pingpong && c.consumer_warpgroups < 2) return "pingpong needs two consumer warpgroups";
  const int most = max_consumer_registers(c.consumer_warpgroups);
  const int least = launch_registers(c.consumer_warpgroups);
  if (c.consumer_registers % 8 != 0 || c.consumer_registers < least ||
      c.consumer_registers > most) {
    return "consumer registers " + std::to_string(c.consumer_registers) +
           " outside what setmaxnreg can grant " + std::to_string(c.consumer_warpgroups) +
           " consumer warpgroups: a multiple of 8 in [" + std::to_string(least) + ", " +
           std::to_string(most) + "]";
  }
  const bool power_of_two = c.cluster_ctas > 0 && (c.cluster_ctas & (c.cluster_ctas - 1)) == 0;
  if (!power_of_two || c.cluster_ctas > 8) return "cluster size must be 1, 2, 4 or 8";
  // Each CTA of a cluster loads its share of every K/V tile: whole 8-row swizzle atoms.
  if (c.block_n % (8 * c.cluster_ctas) != 0) {
    return "key tile " + std::to_string(c.block_n) + " does not split into " +
           std::to_string(c.cluster_ctas) + " multicast slices of whole 8-row atoms";
  }
  const int64_t smem = smem_bytes(c, head_dim, element_bytes);
  if (smem > kSmemLimitBytes) {
    return "shared memory " + std::to_string(smem / 1024) + " KiB over one CTA's 227 KiB";
  }
  return "";
}

TuneConfig random_config(const TuneSpace& space, std::mt19937_64* rng) {
  TuneConfig c;
  c.block_n = pick(space.block_n, rng);
  c.stages = pick(space.stages, rng);
  c.consumer_warpgroups = pick(space.consumer_warpgroups, rng);
  c.consumer_registers =
      max_consumer_registers(c.consumer_warpgroups) - pick(space.register_offsets, rng);
  c.cluster_ctas = pick(space.cluster_ctas, rng);
  c.pingpong = coin(rng);
  c.intra_overlap = coin(rng);
  return c;
}

TuneConfig mutate(const TuneConfig& parent, const TuneSpace& space, std::mt19937_64* rng) {
  TuneConfig c = parent;
  // Draw until the knob drawn changes: a mutation that changes nothing would waste a compile.
  for (int attempt = 0; attempt < 64 && c == parent; ++attempt) {
    const int offset = register_offset(c);
    switch (std::uniform_int_distribution<int>(0, 6)(*rng)) {
      case 0:
        c.block_n = pick(space.block_n, rng);
        break;
      case 1:
        c.stages = pick(space.stages, rng);
        break;
      case 2:
        c.consumer_warpgroups = pick(space.consumer_warpgroups, rng);
        c.consumer_registers = max_consumer_registers(c.consumer_warpgroups) - offset;
        break;
      case 3:
        c.consumer_registers =
            max_consumer_registers(c.consumer_warpgroups) - pick(space.register_offsets, rng);
        break;
      case 4:
        c.cluster_ctas = pick(space.cluster_ctas, rng);
        break;
      case 5:
        c.pingpong = !c.pingpong;
        break;
      default:
        c.intra_overlap = !c.intra_overlap;
        break;
    }
  }
  return c;
}

TuneConfig crossover(const TuneConfig& a, const TuneConfig& b, std::mt19937_64* rng) {
  TuneConfig c;
  c.block_n = coin(rng) ? a.block_n : b.block_n;
  c.stages = coin(rng) ? a.stages : b.stages;
  // The register budget travels with the consumer count it was chosen for.
  const TuneConfig& wg = coin(rng) ? a : b;
  c.consumer_warpgroups = wg.consumer_warpgroups;
  c.consumer_registers = wg.consumer_registers;
  c.cluster_ctas = coin(rng) ? a.cluster_ctas : b.cluster_ctas;
  c.pingpong = coin(rng) ? a.pingpong : b.pingpong;
  c.intra_overlap = coin(rng) ? a.intra_overlap : b.intra_overlap;
  return c;
}

Json to_json(const TuneConfig& c) {
  return Json{{"block_n", c.block_n},
              {"stages", c.stages},
              {"consumer_warpgroups", c.consumer_warpgroups},
              {"block_m", c.block_m()},
              {"consumer_registers", c.consumer_registers},
              {"cluster_ctas", c.cluster_ctas},
              {"pingpong", c.pingpong},
              {"intra_overlap", c.intra_overlap}};
}

bool from_json(const Json& json, TuneConfig* c, std::string* error) {
  int* ints[] = {&c->block_n, &c->stages, &c->consumer_warpgroups, &c->consumer_registers,
                 &c->cluster_ctas};
  const char* int_names[] = {"block_n", "stages", "consumer_warpgroups", "consumer_registers",
                             "cluster_ctas"};
  for (int i = 0; i < 5; ++i) {
    const Json* member = find_member(json, int_names[i]);
    if (member == nullptr || !member->is_number_integer()) {
      *error = std::string("config member '") + int_names[i] + "' missing or not an integer";
      return false;
    }
    *ints[i] = member->get<int>();
  }
  bool* bools[] = {&c->pingpong, &c->intra_overlap};
  const char* bool_names[] = {"pingpong", "intra_overlap"};
  for (int i = 0; i < 2; ++i) {
    const Json* member = find_member(json, bool_names[i]);
    if (member == nullptr || !member->is_boolean()) {
      *error = std::string("config member '") + bool_names[i] + "' missing or not a boolean";
      return false;
    }
    *bools[i] = member->get<bool>();
  }
  return true;
}

}  // namespace flashcore::bench
