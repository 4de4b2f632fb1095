#pragma once
/// A runner's child process: started with posix_spawn in its own process
/// group (so a signal reaches whatever it starts), stdin, stdout and stderr
/// on pipes, output pumped with poll, and always reaped (SIGKILL to the group
/// when dropped unreaped). Used by the runner executor and its probe.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hetbench::agent {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  /// Starts argv[0] (looked up in PATH) with the signal mask and
  /// dispositions reset: the agent blocks SIGTERM in its threads; a child must not.
  absl::Status Start(const std::vector<std::string>& argv);

  /// Writes all of `data` to the child's stdin and closes it. A child that
  /// exits without reading is reported by its exit status, not here.
  void Feed(const std::string& data);

  /// Waits up to `timeout_ms` for output; appends stdout to `out` and keeps
  /// the tail of stderr. Returns false once both pipes are closed.
  bool Pump(int timeout_ms, std::string* out);

  /// Sends `sig` to the child's process group (nothing once reaped).
  void Signal(int sig);

  /// Reaps the child; returns the wait status.
  int Wait();

  /// The last few KiB the child wrote to stderr.
  std::string StderrTail() const;

 private:
  static void Close(int* fd);
  pid_t pid_ = -1;
  bool reaped_ = false;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string stderr_;
};

/// A child that dies before reading its input must not take the agent down
/// with SIGPIPE on the write: ignores SIGPIPE process-wide, once.
void IgnoreSigpipe();

/// "exit status N", "killed by signal N" or "stopped", from a wait status.
std::string DescribeExit(int wait_status);

}  // namespace hetbench::agent
