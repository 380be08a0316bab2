# CPU test of cmake/sm90_tuned_table.cmake, the configure step that turns the reviewed rows of the
# sm90 tuned table into a header (docs/lab.md, "The reviewed table"): unreviewed rows are ignored,
# a reviewed row maps to the expected tile, malformed tables and configs the kernel cannot build
# stop it with a message naming the row. Each case runs the generator as the build would, in a
# process of its own (a FATAL_ERROR ends that process).
# cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch dir> -P tests/cmake/sm90_tuned_table_test.cmake
cmake_minimum_required(VERSION 3.25)

set(generator "${SOURCE_DIR}/cmake/sm90_tuned_table.cmake")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures 0)

function(fail message)
  message(SEND_ERROR "${message}")
endfunction()

# Runs the generator on TABLE; sets rc, log (stdout + stderr, line breaks folded), header and
# extended (the head dims whose reviewed key tile needs CuTe's extended wgmma shapes).
function(generate table)
  set(header "${WORK_DIR}/out.hpp")
  set(extended_file "${WORK_DIR}/extended.txt")
  file(REMOVE "${header}" "${extended_file}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -DTABLE=${table} -DOUTPUT=${header}
                          -DEXTENDED_OUTPUT=${extended_file} -P "${generator}"
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(extended "<none written>")
  if(EXISTS "${extended_file}")
    file(READ "${extended_file}" extended)
  endif()
  set(extended "${extended}" PARENT_SCOPE)
  string(REGEX REPLACE "[ \n]+" " " folded "${out}${err}")
  set(rc ${code} PARENT_SCOPE)
  set(log "${folded}" PARENT_SCOPE)
  set(text "")
  if(EXISTS "${header}")
    file(READ "${header}" text)
  endif()
  set(header "${text}" PARENT_SCOPE)
endfunction()

# A table with one row whose members are ROW_MEMBERS (JSON text) and config CONFIG.
function(one_row_table out name row_members config)
  set(path "${WORK_DIR}/${name}.json")
  file(WRITE "${path}" "{\"schema\": \"flashcore/sm90-tuned\", \"schema_version\": 1, \"rows\": "
                       "[{${row_members}, \"config\": {${config}}}]}")
  set(${out} "${path}" PARENT_SCOPE)
endfunction()

set(shipped_row "\"kernel\": \"sm90\", \"head_dim\": 128, \"dtype\": \"bf16\", \"reviewed\": true")
set(shipped "\"block_n\": 128, \"stages\": 2, \"consumer_warpgroups\": 2, \"block_m\": 128, "
            "\"consumer_registers\": 240, \"cluster_ctas\": 2, \"pingpong\": true, "
            "\"intra_overlap\": true")
string(JOIN "" shipped ${shipped})

# Expects the generator to fail on TABLE with EXPECTED in its message, and write no header.
function(expect_refused case table expected)
  generate("${table}")
  if(rc EQUAL 0)
    fail("${case}: accepted; expected a refusal saying '${expected}'")
  elseif(NOT log MATCHES "${expected}")
    fail("${case}: refused, but the message does not say '${expected}': ${log}")
  elseif(NOT header STREQUAL "")
    fail("${case}: refused, but a header was written")
  endif()
endfunction()

# 1. The checked-in table: its one row is unreviewed, so no tile is replaced.
generate("${SOURCE_DIR}/labs/flashcore/sm90_tuned_h100.json")
if(NOT rc EQUAL 0)
  fail("the checked-in table is refused: ${log}")
elseif(NOT log MATCHES "row 0 \\(sm90 hd128 bf16\\) is not reviewed")
  fail("the checked-in table's unreviewed row is not reported as ignored: ${log}")
elseif(header MATCHES "if \\(" OR NOT header MATCHES "reviewed: 0\\)")
  fail("the checked-in table's unreviewed row reached the header:\n${header}")
elseif(NOT extended STREQUAL "")
  fail("the checked-in table asks for CuTe's extended wgmma shapes at hd '${extended}'")
endif()

# 2. The fixture: two reviewed rows map to their tiles (shared memory as KernelTraits lays it
# out, which tests/cpu/test_sm90_tuned_table.cu checks against the kernel's own sizeof); its
# unreviewed row, whose config no kernel could take, is ignored rather than refused.
generate("${SOURCE_DIR}/tests/cpu/fixtures/sm90_tuned_reviewed.json")
if(NOT rc EQUAL 0)
  fail("the reviewed fixture is refused: ${log}")
else()
  foreach(expected
          "if \\(bf16 == true && head_dim == 128\\) {\n    return {96, 4, 2, 232, 2, 230400};"
          "if \\(bf16 == true && head_dim == 64\\) {\n    return {64, 2, 3, 160, 1, 82944};"
          "rows: 3, reviewed: 2")
    if(NOT header MATCHES "${expected}")
      fail("the reviewed fixture's header lacks '${expected}':\n${header}")
    endif()
  endforeach()
  if(header MATCHES "bf16 == false")
    fail("the fixture's unreviewed fp16 row reached the header:\n${header}")
  endif()
  # Its key tiles (96 and 64) are wgmma N that CuTe offers without the extended shapes.
  if(NOT extended STREQUAL "")
    fail("the fixture asks for CuTe's extended wgmma shapes at hd '${extended}'")
  endif()
endif()

# A reviewed 112-key tile is a wgmma N outside CuTe's standard ones: its head dim is reported, so
# that src/CMakeLists.txt gives that TU CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED.
string(REPLACE "\"block_n\": 128, \"stages\": 2" "\"block_n\": 112, \"stages\": 3" tile_112
       "${shipped}")
string(REPLACE "\"consumer_registers\": 240" "\"consumer_registers\": 232" tile_112 "${tile_112}")
one_row_table(t tile_112 "${shipped_row}" "${tile_112}")
generate("${t}")
if(NOT rc EQUAL 0)
  fail("a reviewed 112-key row is refused: ${log}")
elseif(NOT extended STREQUAL "128")
  fail("a reviewed 112-key row at hd128: extended head dims '${extended}', expected 128")
endif()

# 3. Malformed tables.
file(WRITE "${WORK_DIR}/not_json.json" "{\"schema\": \"flashcore/sm90-tuned\", \"rows\": [")
expect_refused("not JSON" "${WORK_DIR}/not_json.json" "not a JSON object")
file(WRITE "${WORK_DIR}/schema.json" "{\"schema\": \"flashcore-bench/leaderboard\", \"rows\": []}")
expect_refused("another schema" "${WORK_DIR}/schema.json" "expected flashcore/sm90-tuned")
file(WRITE "${WORK_DIR}/version.json"
     "{\"schema\": \"flashcore/sm90-tuned\", \"schema_version\": 2, \"rows\": []}")
expect_refused("a newer schema" "${WORK_DIR}/version.json" "schema_version 2, this build reads 1")
file(WRITE "${WORK_DIR}/rows.json"
     "{\"schema\": \"flashcore/sm90-tuned\", \"schema_version\": 1, \"rows\": {}}")
expect_refused("rows not a list" "${WORK_DIR}/rows.json" "member 'rows' must be a array")
one_row_table(t no_reviewed "\"kernel\": \"sm90\", \"head_dim\": 128, \"dtype\": \"bf16\""
              "${shipped}")
expect_refused("no reviewed flag" "${t}" "row 0: member 'reviewed' is missing")
one_row_table(t reviewed_text "\"kernel\": \"sm90\", \"head_dim\": 128, \"dtype\": \"bf16\", \
\"reviewed\": \"yes\"" "${shipped}")
expect_refused("reviewed as text" "${t}" "member 'reviewed' must be a boolean, not STRING")
one_row_table(t kernel "\"kernel\": \"sm80\", \"head_dim\": 128, \"dtype\": \"bf16\", \
\"reviewed\": true" "${shipped}")
expect_refused("another kernel" "${t}" "kernel 'sm80': this table holds sm90 rows")
one_row_table(t head_dim "\"kernel\": \"sm90\", \"head_dim\": 100, \"dtype\": \"bf16\", \
\"reviewed\": false" "${shipped}")
expect_refused("a head dim with no instantiation" "${t}" "head_dim 100 is not an sm90 instantiation")
one_row_table(t dtype "\"kernel\": \"sm90\", \"head_dim\": 128, \"dtype\": \"fp8\", \
\"reviewed\": false" "${shipped}")
expect_refused("an unknown dtype" "${t}" "dtype 'fp8': expected fp16 or bf16")
string(REPLACE "\"stages\": 2, " "" no_stages "${shipped}")
one_row_table(t no_stages "${shipped_row}" "${no_stages}")
expect_refused("a config without stages" "${t}" "config: member 'stages' is missing")
string(REPLACE "\"block_n\": 128" "\"block_n\": 128.5" fraction "${shipped}")
one_row_table(t fraction "${shipped_row}" "${fraction}")
expect_refused("a fractional key tile" "${t}" "member 'block_n' must be an integer, not 128.5")
string(REPLACE "\"block_m\": 128" "\"block_m\": 192" block_m "${shipped}")
one_row_table(t block_m "${shipped_row}" "${block_m}")
expect_refused("block_m against the warpgroups" "${t}" "block_m 192 is not 64 x consumer_warpgroups")
file(WRITE "${WORK_DIR}/twice.json" "{\"schema\": \"flashcore/sm90-tuned\", \"schema_version\": 1, "
     "\"rows\": [{${shipped_row}, \"config\": {${shipped}}}, {${shipped_row}, \"config\": {${shipped}}}]}")
expect_refused("two reviewed rows for one kernel" "${WORK_DIR}/twice.json"
               "row 1 \\(sm90 hd128 bf16\\): a second reviewed row for this head dim and dtype")

# 4. Reviewed configs the kernel cannot build (tools/bench/tune_config.cpp's checks), each the
# shipped hd128 bf16 config with the knobs given changed.
function(expect_bad_config case expected)
  set(knobs block_n 128 stages 2 consumer_warpgroups 2 consumer_registers 240 cluster_ctas 2
            pingpong true)
  cmake_parse_arguments(PARSE_ARGV 2 set "" "block_n;stages;consumer_warpgroups;consumer_registers;cluster_ctas;pingpong" "")
  foreach(knob block_n stages consumer_warpgroups consumer_registers cluster_ctas pingpong)
    list(FIND knobs ${knob} at)
    math(EXPR at "${at} + 1")
    list(GET knobs ${at} value)
    if(DEFINED set_${knob})
      set(value ${set_${knob}})
    endif()
    set(${knob} ${value})
  endforeach()
  string(MAKE_C_IDENTIFIER "${case}" name)
  one_row_table(table ${name} "${shipped_row}" "\"block_n\": ${block_n}, \"stages\": ${stages}, \
\"consumer_warpgroups\": ${consumer_warpgroups}, \"consumer_registers\": ${consumer_registers}, \
\"cluster_ctas\": ${cluster_ctas}, \"pingpong\": ${pingpong}, \"intra_overlap\": true")
  expect_refused("${case}" "${table}" "the kernel cannot be built with this config: ${expected}")
endfunction()
expect_bad_config("shared memory over the limit" "shared memory 433 KiB over one CTA's 227 KiB"
                  block_n 192 stages 4 consumer_warpgroups 3 consumer_registers 160)
expect_bad_config("registers setmaxnreg cannot grant" "consumer_registers 248 outside what setmaxnreg"
                  consumer_registers 248)
expect_bad_config("registers below the launch's" "consumer_registers 160 outside what setmaxnreg"
                  consumer_registers 160)
expect_bad_config("a key tile wgmma cannot take" "key tile block_n 72 is not a multiple of 16"
                  block_n 72)
expect_bad_config("a key tile the multicast cannot split"
                  "key tile 80 does not split into 4 multicast slices" block_n 80 cluster_ctas 4)
expect_bad_config("a cluster size" "cluster_ctas must be 1, 2, 4 or 8" cluster_ctas 3)
expect_bad_config("a schedule the library does not build"
                  "pingpong and intra_overlap must both be true" pingpong false)
