#include "server/store/sample_segments.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hetbench::server {

namespace {
absl::Status IoError(const std::string& what, int err) {
  std::string msg = absl::StrCat("job store: ", what, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg + "; free disk space");
  return absl::UnavailableError(msg);
}

// fsync of a directory, so an entry made in it survives a crash of the machine.
absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(absl::StrCat("open '", dir, "'"), errno);
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  return rc == 0 ? absl::OkStatus() : IoError(absl::StrCat("fsync '", dir, "'"), err);
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

SampleSegments::~SampleSegments() {
  for (const auto& [id, fd] : fds_) close(fd);
}

std::string SampleSegments::PathOf(int64_t id) const { return absl::StrFormat("%s/%06d.seg", dir_, id); }

absl::Status SampleSegments::CreateDirectory() const {
  if (mkdir(dir_.c_str(), 0755) == 0) return SyncDirectory(ParentOf(dir_));
  if (errno != EEXIST) {
    return IoError(absl::StrCat("make the sample segment directory '", dir_, "'"), errno);
  }
  struct stat st;
  if (stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job store: '", dir_, "' is not a directory; it holds the store's sample batches: move it away"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SampleSegments::Fd(int64_t id, bool create) {
  if (auto it = fds_.find(id); it != fds_.end()) return it->second;
  const std::string path = PathOf(id);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (absl::Status s = SyncDirectory(dir_); !s.ok()) {
        close(fd);
        return s;
      }
    }
  }
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::DataLossError(absl::StrCat("job store: sample segment '", path,
                                              "' is missing (the directory must stay beside the database)"));
    }
    return IoError(absl::StrCat("open '", path, "'"), errno);
  }
  fds_.emplace(id, fd);
  return fd;
}

absl::Status SampleSegments::Flush(int64_t id, int64_t offset) {
  absl::Status s = WriteStaged(id, offset);
  staged_.clear();  // keeps its capacity: the next commit's bytes are about as many
  return s;
}

absl::Status SampleSegments::WriteStaged(int64_t id, int64_t offset) {
  if (staged_.empty()) return absl::OkStatus();
  absl::StatusOr<int> fd = Fd(id, /*create=*/true);
  if (!fd.ok()) return fd.status();
  size_t done = 0;
  while (done < staged_.size()) {
    const ssize_t n = pwrite(*fd, staged_.data() + done, staged_.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(absl::StrCat("write '", PathOf(id), "'"), n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  if (fdatasync(*fd) != 0) return IoError(absl::StrCat("fdatasync '", PathOf(id), "'"), errno);
  return absl::OkStatus();
}

absl::StatusOr<std::string> SampleSegments::Read(int64_t id, int64_t offset, int64_t bytes) {
  absl::StatusOr<int> fd = Fd(id, /*create=*/false);
  if (!fd.ok()) return fd.status();
  std::string out(static_cast<size_t>(bytes), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = pread(*fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(absl::StrCat("read '", PathOf(id), "'"), errno);
    if (n == 0) {
      return absl::DataLossError(absl::StrCat("job store: sample segment '", PathOf(id), "' ends at ", offset + done,
                                              ", before a batch's end at ", offset + bytes));
    }
    done += static_cast<size_t>(n);
  }
  return out;
}

void SampleSegments::Release(int64_t id, int64_t offset, int64_t bytes) {
  absl::StatusOr<int> fd = Fd(id, /*create=*/false);
  if (!fd.ok() || bytes <= 0) return;
  (void)fallocate(*fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(bytes));
}

absl::Status SampleSegments::CheckLength(int64_t id, int64_t bytes) {
  absl::StatusOr<int> fd = Fd(id, /*create=*/false);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(*fd, &st) != 0) return IoError(absl::StrCat("stat '", PathOf(id), "'"), errno);
  if (st.st_size < bytes) {
    return absl::DataLossError(absl::StrCat("job store: sample segment '", PathOf(id), "' holds ", st.st_size,
                                            " bytes; its committed batches end at ", bytes));
  }
  return absl::OkStatus();
}

}  // namespace hetbench::server
