#include "agent/runners/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace hetbench::agent {

namespace {
constexpr size_t kStderrTail = 4096;
}  // namespace

ChildProcess::~ChildProcess() {
  Close(&in_);
  Close(&out_);
  Close(&err_);
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
}

absl::Status ChildProcess::Start(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::FailedPreconditionError("no runner command configured (--python-runner)");
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // the agent blocks SIGTERM in its threads; the runner must not
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  if (rc != 0) {
    pid_ = -1;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start the runner `", absl::StrJoin(argv, " "), "`: ", strerror(rc)));
  }
  return absl::OkStatus();
}

void ChildProcess::Feed(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(in_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EPIPE: the runner is gone (SIGPIPE is ignored by the agent)
    off += static_cast<size_t>(n);
  }
  Close(&in_);
}

bool ChildProcess::Pump(int timeout_ms, std::string* out) {
  pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
  if (out_ < 0 && err_ < 0) return false;
  const int n = poll(fds, 2, timeout_ms);
  if (n <= 0) return true;
  char buf[65536];
  if (out_ >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
    const ssize_t r = read(out_, buf, sizeof(buf));
    if (r > 0) {
      out->append(buf, static_cast<size_t>(r));
    } else if (r == 0 || errno != EINTR) {
      Close(&out_);
    }
  }
  if (err_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
    const ssize_t r = read(err_, buf, sizeof(buf));
    if (r > 0) {
      stderr_.append(buf, static_cast<size_t>(r));
      if (stderr_.size() > 2 * kStderrTail) stderr_.erase(0, stderr_.size() - kStderrTail);
    } else if (r == 0 || errno != EINTR) {
      Close(&err_);
    }
  }
  return out_ >= 0 || err_ >= 0;
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(-pid_, sig);
}

int ChildProcess::Wait() {
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return st;
}

std::string ChildProcess::StderrTail() const {
  return stderr_.size() > kStderrTail ? stderr_.substr(stderr_.size() - kStderrTail) : stderr_;
}

void ChildProcess::Close(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void IgnoreSigpipe() {
  static const bool done = [] {
    signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)done;
}

std::string DescribeExit(int st) {
  if (WIFEXITED(st)) return absl::StrCat("exit status ", WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return absl::StrCat("killed by signal ", WTERMSIG(st));
  return "stopped";
}

}  // namespace hetbench::agent
