#include "agent/executors/torch_threads.h"

#include <torch/torch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hetbench::agent {

namespace {

struct Setting {
  absl::Mutex mu;
  int holders ABSL_GUARDED_BY(mu) = 0;
  int threads ABSL_GUARDED_BY(mu) = 0;
};

Setting& Global() {
  static Setting* s = new Setting();
  return *s;
}

}  // namespace

TorchThreads::TorchThreads(int wanted) : wanted_(std::max(wanted, 1)) {
  Setting& s = Global();
  absl::MutexLock l(&s.mu);
  if (s.holders == 0) {
    torch::set_num_threads(wanted_);
    s.threads = wanted_;
  }
  ++s.holders;
  threads_ = s.threads;
}

TorchThreads::~TorchThreads() {
  Setting& s = Global();
  absl::MutexLock l(&s.mu);
  --s.holders;
}

std::string TorchThreads::note() const {
  if (threads_ == wanted_) return "";
  return absl::StrCat("ran with ", threads_, " LibTorch threads, not the ", wanted_,
                      " asked for: the count is process-wide and another task of this agent held it");
}

int TorchThreads::holders() {
  Setting& s = Global();
  absl::MutexLock l(&s.mu);
  return s.holders;
}

}  // namespace hetbench::agent
