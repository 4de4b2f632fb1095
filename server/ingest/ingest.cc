#include "server/ingest/ingest.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hetbench::server {

namespace {
std::string AttemptKey(const std::string& task_id, int attempt) { return absl::StrCat(task_id, "/", attempt); }
}  // namespace

Ingest::~Ingest() { Stop(); }

void Ingest::Start(std::unique_ptr<JobStore> connection, BatchWriter::Post post) {
  writer_ = std::make_unique<BatchWriter>(std::move(connection), std::move(post));
}

void Ingest::Stop() {
  if (writer_) writer_->Stop();
}

void Ingest::Begin(const std::string& task_id, int attempt) {
  Attempt& a = attempts_[task_id];
  a = Attempt{};
  a.attempt = attempt;
  a.samples.attempt = attempt;
}

void Ingest::Restore(const std::string& task_id, int attempt, const std::vector<v1::SampleBatch>& samples,
                     std::vector<v1::PowerBatch> power) {
  Begin(task_id, attempt);
  Attempt& a = attempts_[task_id];
  for (const v1::SampleBatch& b : samples) a.samples.Add(b);
  for (const v1::PowerBatch& b : power) Advance(a, b);
  a.power = std::move(power);
}

void Ingest::End(const std::string& task_id) { attempts_.erase(task_id); }

Ingest::Attempt* Ingest::Current(const std::string& task_id, int attempt) {
  auto it = attempts_.find(task_id);
  return it == attempts_.end() || it->second.attempt != attempt ? nullptr : &it->second;
}

Ingest::Collected Ingest::Take(const std::string& task_id, int attempt) {
  Collected out;
  if (Attempt* a = Current(task_id, attempt)) {
    out.samples = std::move(a->samples);
    out.power = std::move(a->power);
    a->samples = TaskAggregate{};
    a->samples.attempt = attempt;
    a->power.clear();
  }
  return out;
}

void Ingest::Write(std::shared_ptr<const v1::SampleBatch> batch, const BatchSummary& summary, SamplesStored then) {
  const std::string key = AttemptKey(batch->task_id(), batch->attempt());
  ++pending_[key];
  writer_->Write(batch, [this, batch, summary, key, then = std::move(then)](absl::StatusOr<bool> stored) {
    bool counted = false;
    if (stored.ok() && *stored) {
      if (Attempt* a = Current(batch->task_id(), batch->attempt())) {
        a->samples.Add(*batch, summary);
        counted = true;
      }
    }
    then(stored, counted);
    Written(key);
  });
}

void Ingest::Write(std::shared_ptr<const v1::PowerBatch> batch, PowerStored then) {
  const std::string key = AttemptKey(batch->task_id(), batch->attempt());
  ++pending_[key];
  writer_->Write(batch, [this, batch, key, then = std::move(then)](absl::StatusOr<bool> stored) {
    bool counted = false;
    PowerDelta delta{0, NAN};
    if (stored.ok() && *stored) {
      if (Attempt* a = Current(batch->task_id(), batch->attempt())) {
        delta = Advance(*a, *batch);
        a->power.push_back(*batch);
        counted = true;
      }
    }
    then(stored, counted, delta);
    Written(key);
  });
}

PowerDelta Ingest::Advance(Attempt& a, const v1::PowerBatch& b) {
  PowerDelta d{0, NAN};
  LastReading& last = a.last_by_sensor[b.sensor().name()];
  for (int i = 0; i < b.t_ns_size(); ++i) {
    const double dt = static_cast<double>(b.t_ns(i) - last.t_ns) * 1e-9;
    const bool have_prev = last.t_ns != 0 && dt > 0;
    if (b.sensor().has_energy_counter()) {
      if (have_prev) {
        d.joules += std::max(0.0, b.joules(i) - last.joules);
        d.watts = (b.joules(i) - last.joules) / dt;
      }
      last.joules = b.joules(i);
    } else if (!std::isnan(b.watts(i))) {
      if (have_prev) d.joules += 0.5 * (b.watts(i) + last.watts) * dt;
      d.watts = b.watts(i);
      last.watts = b.watts(i);
    }
    last.t_ns = b.t_ns(i);
  }
  return d;
}

bool Ingest::AfterWrites(const std::string& task_id, int attempt, std::function<void()> fn) {
  const std::string key = AttemptKey(task_id, attempt);
  if (pending_.count(key) == 0) return false;
  waiting_[key] = std::move(fn);
  return true;
}

void Ingest::Written(const std::string& key) {
  auto pending = pending_.find(key);
  if (pending == pending_.end() || --pending->second > 0) return;
  pending_.erase(pending);
  auto waiting = waiting_.find(key);
  if (waiting == waiting_.end()) return;
  std::function<void()> fn = std::move(waiting->second);
  waiting_.erase(waiting);
  fn();
}

}  // namespace hetbench::server
