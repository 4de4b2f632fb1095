#include "agent/held_task.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "agent/power/sensors.h"
#include "common/log.h"
#include "common/names.h"
#include "common/sample_codec.h"

namespace hetbench::agent {

namespace {
constexpr char kLog[] = "agent";

int64_t Ns(double seconds) { return static_cast<int64_t>(seconds * 1e9); }
}  // namespace

bool IsRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

bool HeldTask::Settled() {
  if (abandoned.load()) return finished.load();
  absl::MutexLock o(&out_mu_);
  return done_acked_;
}

void HeldTask::Settle(bool done, bool power, uint64_t seq) {
  absl::MutexLock o(&out_mu_);
  if (done) {
    done_acked_ = true;
  } else if (power) {
    unacked_power_.erase(seq);
  } else {
    unacked_samples_.erase(seq);
  }
}

void HeldTask::ReleaseTap(PowerSampler* sampler) {
  if (tap == nullptr) return;
  sampler->Unsubscribe(tap);
  tap = nullptr;
}

bool HeldTask::ResendOutstanding(const Outlet& out) {
  std::vector<v1::AgentMessage> again;
  {
    absl::MutexLock o(&out_mu_);
    for (const auto& [seq, m] : unacked_samples_) again.push_back(m);
    for (const auto& [seq, m] : unacked_power_) again.push_back(m);
    if (done_.has_value() && !done_acked_) again.push_back(*done_);
  }
  done_written_ = false;
  const bool columns = out.sample_columns != nullptr && out.sample_columns->load();
  for (v1::AgentMessage& m : again) {
    // Packed for an earlier stream's coordinator; this one has not said it
    // takes columns (its Welcome may not have come yet): the arrays again.
    if (m.has_samples() && !m.samples().columns().empty() && !columns) {
      v1::SampleBatch* b = m.mutable_samples();
      if (absl::Status s = DecodeSampleColumns(b->columns(), b); !s.ok()) {
        LogError(kLog, "a held sample batch of ", b->task_id(), " no longer decodes: ", s.ToString());
      }
      b->clear_columns();
    }
    if (!out.write(m)) return false;
    ++out.counters->messages_resent;
    if (m.has_done()) done_written_ = true;
  }
  return true;
}

bool HeldTask::PumpPass(const Outlet& out, int64_t now_ns) {
  const AgentConfig& config = *out.config;
  const bool ended = finished.load();  // read before draining: all records are published by then
  const size_t pending = control->samples.published() - sent_;
  // When acks lag, samples wait in the task's buffer and go out later in
  // fuller batches: the window slows instead of piling up unacked messages.
  size_t unacked = 0;
  {
    absl::MutexLock o(&out_mu_);
    unacked = unacked_samples_.size();
  }
  const bool acks_lag = !ended && unacked >= static_cast<size_t>(config.max_unacked_sample_batches);
  if (acks_lag) ++out.counters->ack_lag_waits;
  bool ok = true;
  if (!acks_lag && (ended || pending >= static_cast<size_t>(config.max_samples_per_batch) ||
                    now_ns - last_samples_send_ns_ >= Ns(config.sample_send_interval_seconds))) {
    ok = DrainSamples(out);
    last_samples_send_ns_ = now_ns;
  }
  // After the TaskDone is built these drain nothing: no record is published
  // after the end, and the power tap is released then.
  if (ok && (ended || now_ns - last_power_send_ns_ >= Ns(config.power_send_interval_seconds))) {
    ok = DrainPower(out);
    last_power_send_ns_ = now_ns;
  }
  if (ok && !ended && now_ns - last_progress_ns_ >= Ns(config.progress_interval_seconds)) {
    ok = SendProgress(out);
    last_progress_ns_ = now_ns;
  }
  if (ok && ended && !done_written_) ok = SendDone(out);
  return ok;
}

bool HeldTask::DrainSamples(const Outlet& out) {
  const size_t published = control->samples.published();
  while (sent_ < published) {
    v1::AgentMessage msg;
    v1::SampleBatch* b = msg.mutable_samples();
    b->set_task_id(assign.task_id());
    b->set_attempt(assign.attempt());
    b->set_seq(next_seq_);
    const int32_t phase = control->samples.at(sent_).phase;
    b->set_phase(static_cast<v1::Phase>(phase));
    while (sent_ < published && b->duration_ns_size() < out.config->max_samples_per_batch) {
      const SampleRecord& r = control->samples.at(sent_);
      if (r.phase != phase) break;  // one phase per batch
      b->add_start_ns(r.start_ns);
      b->add_duration_ns(r.duration_ns);
      b->add_items(r.items);
      ++sent_;
    }
    ++next_seq_;
    samples_sent_ += b->duration_ns_size();
    out.counters->samples_sent += b->duration_ns_size();
    if (out.observer != nullptr && *out.observer) (*out.observer)(*b);
    if (out.sample_columns != nullptr && out.sample_columns->load()) {
      PackSampleColumns(b);
      ++out.counters->sample_batches_as_columns;
    }
    {
      absl::MutexLock o(&out_mu_);
      unacked_samples_[b->seq()] = msg;
    }
    if (!out.write(msg)) return false;  // outstanding: sent again on the next stream
  }
  return true;
}

bool HeldTask::DrainPower(const Outlet& out) {
  if (tap == nullptr) return true;
  bool write_ok = true;
  const auto& sensors = out.sampler->sensors();
  for (size_t i = 0; i < sensors.size(); ++i) {
    int errors = 0;
    std::vector<TimedReading> readings = tap->Take(i, &errors);
    const v1::SensorInfo& info = sensors[i]->info();
    if (!SensorMeasures(info, device)) continue;
    if (readings.empty() && errors == 0) continue;
    size_t first = 0;
    do {  // at least one batch, so an errors-only interval is reported too
      v1::AgentMessage msg;
      v1::PowerBatch* b = msg.mutable_power();
      b->set_task_id(assign.task_id());
      b->set_attempt(assign.attempt());
      b->set_seq(next_power_seq_);
      *b->mutable_sensor() = info;
      b->set_assumptions(sensors[i]->assumptions());
      b->set_read_errors(first == 0 ? errors : 0);
      const size_t last = std::min(readings.size(), first + static_cast<size_t>(out.config->max_samples_per_batch));
      for (size_t k = first; k < last; ++k) {
        b->add_t_ns(readings[k].t_ns - control->task_start_ns);
        b->add_watts(readings[k].watts);
        b->add_joules(readings[k].joules);
      }
      ++next_power_seq_;
      first = last;
      {
        absl::MutexLock o(&out_mu_);
        unacked_power_[b->seq()] = msg;
      }
      // Unsent batches are outstanding and go again on the next stream; the
      // readings still in `readings` are sent in later batches of this loop
      // once a stream is up, so none are dropped.
      if (!out.write(msg)) write_ok = false;
    } while (first < readings.size());
  }
  return write_ok;
}

bool HeldTask::SendProgress(const Outlet& out) {
  v1::AgentMessage p;
  p.mutable_progress()->set_task_id(assign.task_id());
  p.mutable_progress()->set_attempt(assign.attempt());
  p.mutable_progress()->set_phase(static_cast<v1::Phase>(control->phase.load()));
  p.mutable_progress()->set_step(control->step.load());
  p.mutable_progress()->set_total_steps(control->total_steps.load());
  return out.write(p);
}

bool HeldTask::SendDone(const Outlet& out) {
  std::optional<v1::AgentMessage> msg;
  {
    absl::MutexLock o(&out_mu_);
    if (!done_.has_value()) {
      done_ = BuildDone(out);
      // Its counts are final: readings taken after the end (the sampler goes
      // on) must not become a batch the TaskDone does not count.
      ReleaseTap(out.sampler);
      ++out.counters->tasks_finished;
      LogInfo(kLog, "finished ", assign.task_id(), ": ", TaskStateName(done_->done().state()), " (", samples_sent_,
              " samples in ", next_seq_, " batches)");
    }
    if (!done_acked_) msg = done_;
  }
  const bool ok = !msg.has_value() || out.write(*msg);
  done_written_ = ok;
  return ok;
}

v1::AgentMessage HeldTask::BuildDone(const Outlet& out) {
  v1::AgentMessage m;
  v1::TaskDone* d = m.mutable_done();
  d->set_task_id(assign.task_id());
  d->set_attempt(assign.attempt());
  d->set_batches_sent(next_seq_);
  d->set_samples_sent(samples_sent_);
  d->set_power_batches_sent(next_power_seq_);
  if (!result.ok()) {
    d->set_state(v1::TASK_STATE_FAILED);
    d->set_error(std::string(result.status().message()));
    d->set_retryable(IsRetryable(result.status()));
    return m;
  }
  d->set_state(control->cancel.load() ? v1::TASK_STATE_CANCELLED : v1::TASK_STATE_SUCCEEDED);
  *d->mutable_result() = *result;
  v1::ClockSync clock = out.clock();
  if (clock.round_trips() > 0) {
    clock.set_task_start_coordinator_ns(control->task_start_ns + clock.offset_ns());
    *d->mutable_result()->mutable_clock() = clock;
  }
  return m;
}

}  // namespace hetbench::agent
