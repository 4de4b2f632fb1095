// JobApi's fleet-validation baselines: saved with the next version of their
// name (on the loop, in the batch's transaction), read off the loop.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/validate_spec.h"
#include "server/service/job_api.h"

namespace hetbench::server {

namespace {

constexpr int kMaxBaselinesListed = 1000;

// 1-64 characters of [A-Za-z0-9._-]: a name that is safe in a file name, a
// URL and a log line as it stands.
absl::Status CheckBaselineName(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("baseline.name = ", QuotedInput(name),
                                                 ": give 1 to 64 characters of A-Z a-z 0-9 . _ -, e.g. nightly"));
}

}  // namespace

void JobApi::SaveBaseline(v1::Baseline baseline, std::function<void(absl::StatusOr<v1::Baseline>)> done) {
  if (absl::Status s = CheckBaselineName(baseline.name()); !s.ok()) {
    done(s);
    return;
  }
  std::vector<std::string> problems;
  CheckBaseline(baseline, "baseline", &problems);
  if (!problems.empty()) {
    done(absl::InvalidArgumentError(absl::StrJoin(problems, "; ")));
    return;
  }
  auto shared = std::make_shared<std::function<void(absl::StatusOr<v1::Baseline>)>>(std::move(done));
  if (!ended_reader_) {
    (*shared)(absl::UnavailableError("coordinator not started"));
    return;
  }
  baseline.set_created_unix_seconds(p_.clock->SystemNowSeconds());
  // Baselines are no live state: the next version is read and stored in one
  // transaction on the reader's connection (one thread: saves of a name are
  // serialised), never on the loop.
  ended_reader_->Submit(
      [baseline = std::move(baseline), shared](JobStore& store) mutable {
        absl::Status s = store.Begin();
        absl::StatusOr<int> latest = s.ok() ? store.LatestBaselineVersion(baseline.name()) : s;
        if (latest.ok()) {
          baseline.set_version(*latest + 1);
          s = store.PutBaseline(baseline);
        } else {
          s = latest.status();
        }
        if (s.ok()) s = store.Commit();
        if (!s.ok()) {
          (void)store.Rollback();
          (*shared)(absl::UnavailableError(absl::StrCat("baseline not stored: ", s.message(), "; save again")));
          return;
        }
        baseline.clear_skus();
        (*shared)(std::move(baseline));
      },
      [shared](absl::Status refused) { (*shared)(std::move(refused)); });
}

void JobApi::GetBaseline(std::string name, int version, std::function<void(absl::StatusOr<v1::Baseline>)> done) {
  if (absl::Status s = CheckBaselineName(name); !s.ok()) {
    done(s);
    return;
  }
  if (version < 0) {
    done(absl::InvalidArgumentError(absl::StrCat("version = ", version, ": give 1, 2, ... or 0 for the latest")));
    return;
  }
  auto shared = std::make_shared<std::function<void(absl::StatusOr<v1::Baseline>)>>(std::move(done));
  if (!ended_reader_) {
    (*shared)(absl::UnavailableError("coordinator not started"));
    return;
  }
  ended_reader_->Submit(
      [name, version, shared](JobStore& store) {
        absl::StatusOr<std::optional<v1::Baseline>> b = store.GetBaseline(name, version);
        if (!b.ok()) {
          (*shared)(b.status());
        } else if (!b->has_value()) {
          (*shared)(absl::NotFoundError(absl::StrCat("baseline ", name, version > 0 ? absl::StrCat(" v", version) : "",
                                                     ": not stored; `hetbench baseline list` shows what is")));
        } else {
          (*shared)(**std::move(b));
        }
      },
      [shared](absl::Status refused) { (*shared)(std::move(refused)); });
}

void JobApi::ListBaselines(std::string name, std::function<void(absl::StatusOr<std::vector<v1::Baseline>>)> done) {
  if (!name.empty()) {
    if (absl::Status s = CheckBaselineName(name); !s.ok()) {
      done(s);
      return;
    }
  }
  auto shared = std::make_shared<std::function<void(absl::StatusOr<std::vector<v1::Baseline>>)>>(std::move(done));
  if (!ended_reader_) {
    (*shared)(absl::UnavailableError("coordinator not started"));
    return;
  }
  ended_reader_->Submit([name, shared](JobStore& store) { (*shared)(store.ListBaselines(name, kMaxBaselinesListed)); },
                        [shared](absl::Status refused) { (*shared)(std::move(refused)); });
}

}  // namespace hetbench::server
