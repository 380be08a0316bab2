// Running another program (ncu, python3 bench/plot.py) from the lab: argv straight to exec, never
// through a shell, so that paths and NVTX filters need no quoting.
#pragma once

#include <string>
#include <vector>

namespace flashcore::bench {

// The full path of `program` (a bare name is looked up in $PATH, a name with a '/' is taken as
// is), or empty when there is no such executable.
std::string find_program(const std::string& program);

struct CommandResult {
  bool started = false;  // false: the program could not be executed (error says why)
  int exit_code = -1;    // the exit status, or 128 + signal when it was killed
  std::string error;
};

// Runs argv[0] (found as find_program does) with argv, waits for it, and writes its stdout to
// stdout_path and its stderr to stderr_path (empty: inherit the lab's own). env_overrides are
// NAME=VALUE entries added to the environment.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& stdout_path,
                          const std::string& stderr_path,
                          const std::vector<std::string>& env_overrides = {});

}  // namespace flashcore::bench
