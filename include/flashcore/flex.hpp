// FlexAttention in C++: mask_mod and score_mod functors, attention sinks and the block-sparse
// BlockMask (docs/flex.md). What runs on the host; flashcore/flex/create_block_mask.cuh adds the
// GPU builder for functors of your own.
#pragma once

#include "flashcore/flex/block_mask.hpp"
#include "flashcore/flex/block_mask_host.hpp"
#include "flashcore/flex/builtin_mods.hpp"
#include "flashcore/flex/create_block_mask.hpp"
#include "flashcore/flex/mask_mods.hpp"
#include "flashcore/flex/score_mods.hpp"
#include "flashcore/flex/sinks.hpp"
