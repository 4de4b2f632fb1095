#include "common/yaml_fields.h"

#include <map>

#include "absl/strings/str_join.h"

namespace hetbench::yaml {

// A key given twice is refused: yaml-cpp keeps both and lookups see the
// first, so `model: mlp` then `model: cnn` would silently run mlp.
absl::Status CheckUniqueKeys(const YAML::Node& map, const std::string& path) {
  std::map<std::string, int> first_line;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(kv.first, path.empty() ? "key" : path + ".key"), ": a key must be a plain name"));
    }
    const std::string key = kv.first.Scalar();
    auto [it, inserted] = first_line.emplace(key, kv.first.Mark().line + 1);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(Where(kv.first, path.empty() ? key : path + "." + key),
                                                     ": duplicate key, first given on line ", it->second,
                                                     "; keep one"));
    }
  }
  return absl::OkStatus();
}

std::string Where(const YAML::Node& n, const std::string& path) {
  return absl::StrCat(path, " (line ", n.Mark().line + 1, ")");
}

// A model name. YAML reads `null` (and `~`) as no value, so the serving
// calibration model must be quoted; the error says so.
absl::StatusOr<std::string> ModelName(const YAML::Node& n, const std::string& path) {
  if (n.IsNull()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(n, path),
                     ": no model name (YAML reads null as no value); for the serving calibration model write \"null\" "
                     "in quotes"));
  }
  return As<std::string>(n, path, "a model name");
}

absl::Status CheckKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& known) {
  if (!map.IsMap()) return absl::InvalidArgumentError(absl::StrCat(Where(map, path), ": expected a mapping"));
  if (auto s = CheckUniqueKeys(map, path); !s.ok()) return s;
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (known.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(Where(kv.first, path.empty() ? key : path + "." + key),
                                                     ": unknown field; known fields: ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

// Lists are counted before their entries are read, so a huge list costs
// nothing but its parse.
absl::Status CheckCount(const YAML::Node& seq, const std::string& path, size_t max) {
  if (seq.size() <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Where(seq, path), ": ", seq.size(), " entries: at most ", max, " allowed; split the job"));
}

}  // namespace hetbench::yaml
