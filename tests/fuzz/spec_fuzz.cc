// Fuzz target: job specs as a user writes them (YAML), through parsing,
// defaults and validation, and back (a spec that validates must print to
// YAML that parses and validates to the same spec). Built with libFuzzer by
// scripts/fuzz; its seed corpus is replayed by the test suite.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <google/protobuf/util/message_differencer.h>

#include "common/job_spec.h"
#include "common/spec_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;  // specs are small; the server refuses large messages anyway
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = hetbench::ParseJobSpecYaml(text);
  if (!spec.ok()) return 0;
  const hetbench::v1::JobSpec effective = hetbench::WithDefaults(*spec);
  if (!hetbench::ValidateJobSpec(effective).ok()) return 0;
  auto again = hetbench::ParseJobSpecYaml(hetbench::JobSpecToYaml(effective));
  if (!again.ok()) std::abort();  // a valid spec printed to YAML must parse
  const hetbench::v1::JobSpec round = hetbench::WithDefaults(*again);
  if (!hetbench::ValidateJobSpec(round).ok()) std::abort();
  // ... and mean the same (maps compared as maps: their serialized order is not fixed)
  if (!google::protobuf::util::MessageDifferencer::Equals(round, effective)) std::abort();
  return 0;
}
