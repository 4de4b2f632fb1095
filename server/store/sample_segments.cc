#include "server/store/sample_segments.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

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
  for (const auto& [id, fd] : direct_fds_) close(fd);
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

void SampleSegments::FreeDeleter::operator()(char* p) const { std::free(p); }

void SampleSegments::Reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  const size_t capacity = std::max(bytes + kBlock, capacity_ * 2);
  void* p = nullptr;
  if (posix_memalign(&p, kBlock, capacity) != 0) throw std::bad_alloc();
  if (staged_end_ > 0) std::memcpy(p, buffer_.get(), staged_end_);
  buffer_.reset(static_cast<char*>(p));
  capacity_ = capacity;
}

void SampleSegments::StartAt(int64_t id, int64_t offset) {
  segment_ = id;
  offset_ = offset;
  lead_ = staged_end_ = 0;  // nothing to keep if the buffer grows
  Reserve(kBlock);
  lead_ = staged_end_ = static_cast<size_t>(offset) % kBlock;  // bytes never written
}

void SampleSegments::Stage(std::string_view bytes) {
  Reserve(staged_end_ + bytes.size());
  std::memcpy(buffer_.get() + staged_end_, bytes.data(), bytes.size());
  staged_end_ += bytes.size();
}

absl::Status SampleSegments::Flush() {
  absl::Status s = WriteStaged();
  Discard();  // the buffer stays: the next commit's bytes are about as many
  return s;
}

absl::Status SampleSegments::WriteAll(int fd, const char* data, size_t n, int64_t offset, int64_t id, int* err) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = pwrite(fd, data + done, n - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : EIO;
      if (err != nullptr) *err = e;
      return IoError(absl::StrCat("write '", PathOf(id), "'"), e);
    }
    done += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

int SampleSegments::DirectFd(int64_t id) {
  if (direct_refused_) return -1;
  if (auto it = direct_fds_.find(id); it != direct_fds_.end()) return it->second;
  const int fd = open(PathOf(id).c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    direct_refused_ = errno == EINVAL;  // e.g. tmpfs: every write goes through the page cache
    return -1;
  }
  direct_fds_.emplace(id, fd);
  return fd;
}

absl::Status SampleSegments::WriteStaged() {
  const size_t n = staged_end_ - lead_;
  if (n == 0) return absl::OkStatus();
  absl::StatusOr<int> fd = Fd(segment_, /*create=*/true);
  if (!fd.ok()) return fd.status();
  const char* data = buffer_.get() + lead_;
  // Up to the first block boundary through the page cache; from there, a
  // large write straight to the device, its last block padded with zeros
  // (past the committed length: the next commit writes over them).
  const size_t head = std::min(n, lead_ == 0 ? 0 : kBlock - lead_);
  const int direct = n >= kDirectBytes ? DirectFd(segment_) : -1;
  if (direct < 0 || n == head) {
    if (auto s = WriteAll(*fd, data, n, offset_, segment_); !s.ok()) return s;
  } else {
    if (auto s = WriteAll(*fd, data, head, offset_, segment_); !s.ok()) return s;
    const size_t body = n - head;
    const size_t padded = (body + kBlock - 1) / kBlock * kBlock;
    Reserve(staged_end_ + (padded - body));
    std::memset(buffer_.get() + staged_end_, 0, padded - body);
    const char* aligned = buffer_.get() + lead_ + head;  // lead_ + head is 0 or kBlock
    int err = 0;
    absl::Status s = WriteAll(direct, aligned, padded, offset_ + static_cast<int64_t>(head), segment_, &err);
    if (!s.ok() && err == EINVAL) {
      direct_refused_ = true;  // refused after all: through the page cache
      s = WriteAll(*fd, data + head, body, offset_ + static_cast<int64_t>(head), segment_);
    }
    if (!s.ok()) return s;
  }
  if (fdatasync(*fd) != 0) return IoError(absl::StrCat("fdatasync '", PathOf(segment_), "'"), errno);
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
  if (bytes <= 0) return absl::OkStatus();
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
