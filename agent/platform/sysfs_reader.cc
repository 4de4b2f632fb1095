#include "agent/platform/sysfs_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hetbench::agent {

namespace {
absl::Status ErrnoStatus(int err, const std::string& path) {
  std::string msg = absl::StrCat(path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::UnavailableError(msg);
}
}  // namespace

absl::StatusOr<std::string> RealSysfsReader::ReadFile(const std::string& path) const {
  const std::string full = root_ + path;
  const int fd = open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, full);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, full);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 20)) break;  // sysfs files are small; never read a runaway file whole
  }
  close(fd);
  return out;
}

absl::StatusOr<std::vector<std::string>> RealSysfsReader::ListDir(const std::string& path) const {
  const std::string full = root_ + path;
  DIR* dir = opendir(full.c_str());
  if (dir == nullptr) return ErrnoStatus(errno, full);
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<int64_t> ReadInt(const SysfsReader& reader, const std::string& path) {
  auto text = reader.ReadFile(path);
  if (!text.ok()) return text.status();
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value)) {
    return absl::DataLossError(
        absl::StrCat(path, ": not an integer: '", absl::StripAsciiWhitespace(*text).substr(0, 40), "'"));
  }
  return value;
}

}  // namespace hetbench::agent
