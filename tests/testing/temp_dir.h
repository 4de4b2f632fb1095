#pragma once
// A fresh directory under the system temp dir, removed when it goes out of scope.

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace hetbench::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "hetbench") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace hetbench::testing
