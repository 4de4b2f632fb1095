#pragma once
/// Typed reads of YAML nodes for the job spec's parser (spec_yaml.cc): each
/// error names the field's path and line and quotes the value it read
/// (QuotedInput), e.g. "batch_sizes[1] (line 1): 'abc' is not an integer".

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/names.h"

namespace hetbench::yaml {

/// "path (line N)".
std::string Where(const YAML::Node& n, const std::string& path);

/// The scalar `n` as a T; a whole number too large for T is "out of range"
/// with T's bounds, anything else "is not `type_name`".
template <typename T>
absl::StatusOr<T> As(const YAML::Node& n, const std::string& path, const char* type_name) {
  if (!n.IsScalar()) return absl::InvalidArgumentError(absl::StrCat(Where(n, path), ": expected ", type_name));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    // A whole number too large for the field is out of range, not "not an integer".
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const std::string& v = n.Scalar();
      const size_t digits = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
      if (v.size() > digits && v.find_first_not_of("0123456789", digits) == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(Where(n, path), ": ", QuotedInput(n.Scalar()),
                                                       " is out of range: must be in [", std::numeric_limits<T>::min(),
                                                       ", ", std::numeric_limits<T>::max(), "]"));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(Where(n, path), ": ", QuotedInput(n.Scalar()), " is not ", type_name));
  }
}

/// A model name; YAML's null (unquoted `null`, `~`) says to quote the
/// serving calibration model "null".
absl::StatusOr<std::string> ModelName(const YAML::Node& n, const std::string& path);

/// Keys are plain names, none given twice.
absl::Status CheckUniqueKeys(const YAML::Node& map, const std::string& path);

/// A mapping whose keys are all in `known`, none given twice (yaml-cpp keeps
/// both and lookups see the first, so `model: mlp` then `model: cnn` would
/// silently run mlp).
absl::Status CheckKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& known);

/// A list of at most `max` entries, counted before they are read.
absl::Status CheckCount(const YAML::Node& seq, const std::string& path, size_t max);

}  // namespace hetbench::yaml

/// Assigns `expr`'s value with `lhs(value)`, or returns its error.
#define HB_ASSIGN(lhs, expr)          \
  do {                                \
    auto _v = (expr);                 \
    if (!_v.ok()) return _v.status(); \
    lhs(*_v);                         \
  } while (0)
