#pragma once
// Runs the real CLI code in-process (client::RunCli) and captures its output.

#include <sstream>
#include <string>
#include <vector>

#include "client/cli.h"

namespace hetbench::testing {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "hetbench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  const int code = client::RunCli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

}  // namespace hetbench::testing
