#pragma once
/// The `hetbench` command line. Exit codes: 0 success, 1 the job failed or the
/// request was refused (or the server is unreachable), 2 usage error.

#include <iosfwd>

namespace hetbench::client {

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace hetbench::client
