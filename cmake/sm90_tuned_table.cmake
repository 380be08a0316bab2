# The sm90 kernel's reviewed tile table (docs/lab.md, "The reviewed table"): turns the reviewed
# rows of a checked-in table (labs/flashcore/sm90_tuned_h100.json, written by `flashcore-bench
# tune --export`) into the header src/sm90/tuned_tiles.hpp reads at compile time, so that a
# reviewed row for (sm90, head dim, dtype) replaces that instantiation's tile from
# src/sm90/tile_table.hpp. Unreviewed rows are ignored. A malformed table, or a reviewed row the
# kernel cannot build, stops the configure with a message that names the row: the checks are those
# the tuner applies before compiling a candidate (tools/bench/tune_config.cpp, invalid_reason; keep
# them in step), plus the schedule the library's kernels are built with.
#
# From the build: include() this file and call flashcore_sm90_tuned_table(TABLE OUTPUT [VAR]); VAR,
# when given, is set to the head dims whose reviewed key tile is a wgmma N that CuTe offers only
# under CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (src/CMakeLists.txt, src/sm90/wgmma.hpp).
# As a script (the CPU tests): cmake -DTABLE=FILE -DOUTPUT=HEADER [-DEXTENDED_OUTPUT=FILE] -P
# cmake/sm90_tuned_table.cmake (FILE gets VAR's list).

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  cmake_minimum_required(VERSION 3.25)  # the project's policies (IN_LIST)
endif()

# The wgmma N that CuTe's selectors offer without CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED.
set(FLASHCORE_CUTE_STANDARD_WGMMA_N 8 16 32 64 96 128 192 256)

# src/sm90/tile_table.hpp and kernel_traits.hpp: rows per consumer warpgroup, the register file,
# the producer's registers, one CTA's shared memory and the barriers' share of it. Set in the
# calling function's scope (the build calls it from more than one directory).
macro(_fc_kernel_constants)
  set(_fc_rows_per_warpgroup 64)
  set(_fc_register_file 65536)
  set(_fc_producer_registers 24)
  set(_fc_smem_limit 232448)  # 227 KiB
  set(_fc_barrier_bytes 1024)
endmacro()

# The message is the concatenation of the arguments after `where`.
function(_fc_table_error table where)
  string(JOIN "" message ${ARGN})
  message(FATAL_ERROR "sm90 tuned table ${table}: ${where}: ${message}")
endfunction()

# out = the member `key` of the JSON object `json`, which must have JSON type `type` (NUMBER is
# read as an integer).
function(_fc_member out json key type table where)
  string(JSON actual ERROR_VARIABLE err TYPE "${json}" "${key}")
  if(err)
    _fc_table_error("${table}" "${where}" "member '${key}' is missing")
  endif()
  if(NOT actual STREQUAL type)
    string(TOLOWER "${type}" wanted)
    _fc_table_error("${table}" "${where}" "member '${key}' must be a ${wanted}, not ${actual}")
  endif()
  string(JSON value GET "${json}" "${key}")
  if(type STREQUAL "NUMBER" AND NOT value MATCHES "^-?[0-9]+$")
    _fc_table_error("${table}" "${where}" "member '${key}' must be an integer, not ${value}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

function(_fc_align_up out bytes to)
  math(EXPR aligned "(${bytes} + ${to} - 1) / ${to} * ${to}")
  set(${out} ${aligned} PARENT_SCOPE)
endfunction()

# Why the kernel cannot be built with the row's config (empty when it can), and the shared memory
# its SharedStorage takes (as tune_config.cpp's smem_bytes lays it out).
function(_fc_config_problem out_reason out_smem head_dim n stages wg regs cluster pingpong overlap)
  set(reason "")
  math(EXPR threads "(${wg} + 1) * 128")
  if(wg GREATER_EQUAL 1 AND wg LESS_EQUAL 3)
    math(EXPR launch "${_fc_register_file} / ${threads} / 8 * 8")
    if(launch GREATER 256)
      set(launch 256)
    endif()
    math(EXPR most "(${launch} * (${wg} + 1) - ${_fc_producer_registers}) / ${wg} / 8 * 8")
    if(most GREATER 256)
      set(most 256)
    endif()
  endif()
  math(EXPR n_mod "${n} % 16")
  set(smem 0)
  if(n LESS 16 OR n GREATER 256 OR NOT n_mod EQUAL 0)
    set(reason "key tile block_n ${n} is not a multiple of 16 in [16, 256] (wgmma's N, and the K "
               "of the P V GEMM)")
  elseif(stages LESS 2 OR stages GREATER 8)
    set(reason "stages must be 2..8")
  elseif(wg LESS 1 OR wg GREATER 3)
    set(reason "consumer_warpgroups must be 1..3 (the named barriers are laid out for 3)")
  elseif(NOT pingpong OR NOT overlap)
    set(reason "pingpong and intra_overlap must both be true: the library's kernels are built with "
               "that schedule only (src/sm90/launch.cuh); instantiate the variant there first")
  elseif(wg LESS 2)
    set(reason "pingpong needs two consumer warpgroups")
  else()
    math(EXPR regs_mod "${regs} % 8")
    math(EXPR cluster_mod "${n} % (8 * ${cluster})")
    if(NOT regs_mod EQUAL 0 OR regs LESS launch OR regs GREATER most)
      set(reason "consumer_registers ${regs} outside what setmaxnreg can grant ${wg} consumer "
                 "warpgroups: a multiple of 8 in [${launch}, ${most}]")
    elseif(NOT cluster MATCHES "^(1|2|4|8)$")
      set(reason "cluster_ctas must be 1, 2, 4 or 8")
    elseif(NOT cluster_mod EQUAL 0)
      set(reason "key tile ${n} does not split into ${cluster} multicast slices of whole 8-row "
                 "atoms")
    else()
      # 2-byte elements (fp16 and bf16). Two Q stages where they fit, as KernelTraits::kQStages.
      math(EXPR q_tile "${wg} * ${_fc_rows_per_warpgroup} * ${head_dim} * 2")
      math(EXPR kv_tile "${n} * ${head_dim} * 2")
      math(EXPR two_q "2 * ${q_tile} + 2 * ${stages} * ${kv_tile} + ${_fc_barrier_bytes}")
      set(q_stages 1)
      if(two_q LESS_EQUAL _fc_smem_limit)
        set(q_stages 2)
      endif()
      math(EXPR q_ring "${q_stages} * ${q_tile}")
      math(EXPR kv_ring "${stages} * ${kv_tile}")
      _fc_align_up(q_ring ${q_ring} 1024)
      _fc_align_up(kv_ring ${kv_ring} 1024)
      math(EXPR smem "${q_ring} + 2 * ${kv_ring} + ${_fc_barrier_bytes}")
      _fc_align_up(smem ${smem} 1024)
      if(smem GREATER _fc_smem_limit)
        math(EXPR kib "${smem} / 1024")
        set(reason "shared memory ${kib} KiB over one CTA's 227 KiB")
      endif()
    endif()
  endif()
  string(JOIN "" reason ${reason})
  set(${out_reason} "${reason}" PARENT_SCOPE)
  set(${out_smem} ${smem} PARENT_SCOPE)
endfunction()

function(flashcore_sm90_tuned_table table output)
  _fc_kernel_constants()
  if(NOT EXISTS "${table}")
    message(FATAL_ERROR "sm90 tuned table ${table}: no such file (FLASHCORE_SM90_TUNED_TABLE)")
  endif()
  file(READ "${table}" json)
  string(JSON schema ERROR_VARIABLE err GET "${json}" "schema")
  if(err)
    _fc_table_error("${table}" "the document" "not a JSON object with a 'schema' member: ${err}")
  endif()
  if(NOT schema STREQUAL "flashcore/sm90-tuned")
    _fc_table_error("${table}" "the document" "schema '${schema}', expected flashcore/sm90-tuned")
  endif()
  _fc_member(version "${json}" "schema_version" NUMBER "${table}" "the document")
  if(NOT version EQUAL 1)
    _fc_table_error("${table}" "the document" "schema_version ${version}, this build reads 1")
  endif()
  _fc_member(rows "${json}" "rows" ARRAY "${table}" "the document")
  string(JSON row_count LENGTH "${rows}")

  set(cases "")
  set(seen "")
  set(extended_head_dims "")
  set(reviewed_count 0)
  if(row_count GREATER 0)
    math(EXPR last "${row_count} - 1")
    foreach(i RANGE ${last})
      string(JSON row GET "${rows}" ${i})
      set(where "row ${i}")
      string(JSON row_type TYPE "${rows}" ${i})
      if(NOT row_type STREQUAL "OBJECT")
        _fc_table_error("${table}" "${where}" "must be an object, not ${row_type}")
      endif()
      _fc_member(kernel "${row}" "kernel" STRING "${table}" "${where}")
      _fc_member(head_dim "${row}" "head_dim" NUMBER "${table}" "${where}")
      _fc_member(dtype "${row}" "dtype" STRING "${table}" "${where}")
      _fc_member(reviewed "${row}" "reviewed" BOOLEAN "${table}" "${where}")
      _fc_member(config "${row}" "config" OBJECT "${table}" "${where}")
      if(NOT kernel STREQUAL "sm90")
        _fc_table_error("${table}" "${where}" "kernel '${kernel}': this table holds sm90 rows")
      endif()
      if(NOT head_dim MATCHES "^(32|64|96|128|160|192|224|256)$")
        _fc_table_error("${table}" "${where}" "head_dim ${head_dim} is not an sm90 instantiation "
                                              "(a multiple of 32 up to 256)")
      endif()
      if(NOT dtype MATCHES "^(fp16|bf16)$")
        _fc_table_error("${table}" "${where}" "dtype '${dtype}': expected fp16 or bf16")
      endif()
      set(where "row ${i} (sm90 hd${head_dim} ${dtype})")
      foreach(key block_n stages consumer_warpgroups consumer_registers cluster_ctas)
        _fc_member(${key} "${config}" "${key}" NUMBER "${table}" "${where} config")
      endforeach()
      foreach(key pingpong intra_overlap)
        _fc_member(${key} "${config}" "${key}" BOOLEAN "${table}" "${where} config")
      endforeach()
      # block_m is derived (64 rows per consumer warpgroup); the export writes it for readers.
      string(JSON block_m ERROR_VARIABLE no_block_m GET "${config}" "block_m")
      math(EXPR derived_m "${consumer_warpgroups} * ${_fc_rows_per_warpgroup}")
      if(NOT no_block_m AND NOT block_m STREQUAL derived_m)
        _fc_table_error("${table}" "${where}" "block_m ${block_m} is not 64 x consumer_warpgroups "
                                              "(${derived_m})")
      endif()
      if(NOT reviewed)
        message(STATUS "sm90 tuned table: ${where} is not reviewed; the shipped tile stays")
        continue()
      endif()
      if("${dtype}_${head_dim}" IN_LIST seen)
        _fc_table_error("${table}" "${where}" "a second reviewed row for this head dim and dtype")
      endif()
      list(APPEND seen "${dtype}_${head_dim}")
      _fc_config_problem(reason smem ${head_dim} ${block_n} ${stages} ${consumer_warpgroups}
                         ${consumer_registers} ${cluster_ctas} ${pingpong} ${intra_overlap})
      if(reason)
        _fc_table_error("${table}" "${where}" "the kernel cannot be built with this config: "
                                              "${reason}")
      endif()
      math(EXPR reviewed_count "${reviewed_count} + 1")
      if(NOT block_n IN_LIST FLASHCORE_CUTE_STANDARD_WGMMA_N)
        list(APPEND extended_head_dims ${head_dim})
      endif()
      set(bf16 false)
      if(dtype STREQUAL "bf16")
        set(bf16 true)
      endif()
      string(APPEND cases
             "  // ${where}: block_m ${derived_m}, ${smem} bytes of shared memory\n"
             "  if (bf16 == ${bf16} && head_dim == ${head_dim}) {\n"
             "    return {${block_n}, ${stages}, ${consumer_warpgroups}, ${consumer_registers}, "
             "${cluster_ctas}, ${smem}};\n"
             "  }\n")
      message(STATUS "sm90 tuned table: ${where} is reviewed: block_n ${block_n}, stages "
                     "${stages}, ${consumer_warpgroups} consumer warpgroups at "
                     "${consumer_registers} registers, clusters of ${cluster_ctas}")
    endforeach()
  endif()

  string(CONCAT text "// Generated at configure time by cmake/sm90_tuned_table.cmake from\n"
           "// ${table}\n"
           "// (rows: ${row_count}, reviewed: ${reviewed_count}). Do not edit: edit the table and "
           "re-run CMake.\n"
           "// Included by src/sm90/tuned_tiles.hpp, which defines TunedTile.\n"
           "#pragma once\n\n"
           "namespace flashcore::sm90 {\n\n"
           "constexpr TunedTile table_tile([[maybe_unused]] bool bf16, "
           "[[maybe_unused]] int head_dim) {\n"
           "${cases}"
           "  return {};\n"
           "}\n\n"
           "}  // namespace flashcore::sm90\n")
  # Rewritten only when it changes, so that a re-configure does not rebuild every sm90 kernel.
  file(CONFIGURE OUTPUT "${output}" CONTENT "${text}" @ONLY)
  if(ARGC GREATER 2)
    list(REMOVE_DUPLICATES extended_head_dims)
    set(${ARGV2} "${extended_head_dims}" PARENT_SCOPE)
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT DEFINED TABLE OR NOT DEFINED OUTPUT)
    message(FATAL_ERROR "usage: cmake -DTABLE=FILE -DOUTPUT=HEADER -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  flashcore_sm90_tuned_table("${TABLE}" "${OUTPUT}" extended_head_dims)
  if(DEFINED EXTENDED_OUTPUT)  # the test's view of the optional third argument
    file(WRITE "${EXTENDED_OUTPUT}" "${extended_head_dims}")
  endif()
endif()
