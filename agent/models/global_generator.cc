#include "agent/models/global_generator.h"

namespace hetbench::agent {

absl::Mutex& GlobalGeneratorMutex() {
  static absl::Mutex mu(absl::kConstInit);
  return mu;
}

}  // namespace hetbench::agent
