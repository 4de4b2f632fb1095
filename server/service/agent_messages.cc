#include "server/service/agent_messages.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/log.h"
#include "common/names.h"
#include "common/sample_codec.h"
#include "common/serving_spec.h"
#include "server/ingest/energy_cost.h"
#include "server/validation/judge.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";

bool IsTerminalTaskState(v1::TaskState s) {
  return s == v1::TASK_STATE_SUCCEEDED || s == v1::TASK_STATE_FAILED || s == v1::TASK_STATE_CANCELLED;
}
}  // namespace

AgentMessages::Checked AgentMessages::Check(v1::AgentMessage* message, int max_samples_per_batch) {
  // Runs at the edge, on the stream's thread: O(message) checks and the
  // histogram counts, so the loop only stores and adds.
  Checked c;
  const v1::AgentMessage& m = *message;
  if (m.has_samples()) {
    v1::SampleBatch& b = *message->mutable_samples();
    int first_negative = -1;  // the first step with a negative duration or items
    if (!b.columns().empty()) {
      const int64_t declared = SampleColumnsCount(b.columns());
      if (b.start_ns_size() + b.duration_ns_size() + b.items_size() > 0) {
        c.problem = "samples: both columns and start_ns/duration_ns/items are set; send one form";
      } else if (declared > max_samples_per_batch) {
        c.problem =
            absl::StrCat("samples.columns: ", declared, " samples in one batch: at most ", max_samples_per_batch);
      } else {
        // One pass: the durations kept (the aggregate keeps them), the start
        // times and items summarized as they are read and not kept; the
        // columns stay, for the store.
        const int n = static_cast<int>(std::max<int64_t>(declared, 0));
        b.mutable_duration_ns()->Reserve(n);
        int64_t* duration = b.mutable_duration_ns()->AddNAlreadyReserved(n);
        BatchSummarizer summary;
        int i = 0;
        absl::Status s = ForEachSampleStep(b.columns(), [&](int64_t start, int64_t d, int32_t items) {
          if ((d < 0 || items < 0) && first_negative < 0) first_negative = i;
          duration[i++] = d;
          summary.Add(start, d, items);
        });
        if (s.ok()) {
          c.summary = summary.Finish();
        } else {
          b.clear_duration_ns();
          c.problem = absl::StrCat("samples.columns: ", s.message());
        }
      }
    } else {
      const int n = b.duration_ns_size();
      if (n > max_samples_per_batch) {
        c.problem = absl::StrCat("samples.duration_ns: ", n, " samples in one batch: at most ", max_samples_per_batch);
      } else if (b.start_ns_size() != n) {
        c.problem = absl::StrCat("samples.start_ns: ", b.start_ns_size(), " values, duration_ns has ", n);
      } else if (b.items_size() != n) {
        c.problem = absl::StrCat("samples.items: ", b.items_size(), " values, duration_ns has ", n);
      } else {
        // One pass for the checks and the aggregate's figures; the loop merges them.
        c.summary = SummarizeBatch(b.start_ns().data(), b.duration_ns().data(), b.items().data(), n);
        if (n > 0 && (c.summary.min < 0 || c.summary.min_items < 0)) {
          first_negative = 0;
          while (b.duration_ns(first_negative) >= 0 && b.items(first_negative) >= 0) ++first_negative;
        }
      }
    }
    if (!c.problem.empty()) return c;
    if (b.phase() != v1::PHASE_TRAIN && b.phase() != v1::PHASE_INFER && b.phase() != v1::PHASE_SERVE &&
        b.phase() != v1::PHASE_TTFT && b.phase() != v1::PHASE_TPOT) {
      c.problem =
          absl::StrCat("samples.phase = ", static_cast<int>(b.phase()), ": must be TRAIN, INFER, SERVE, TTFT or TPOT");
    } else if (first_negative >= 0) {
      c.problem = absl::StrCat("samples[", first_negative, "]: negative duration or items");
    } else {
      c.steps = Metrics::CountSteps(b.duration_ns());
    }
  } else if (m.has_power()) {
    const v1::PowerBatch& b = m.power();
    const int n = b.t_ns_size();
    if (n > max_samples_per_batch) {
      c.problem = absl::StrCat("power.t_ns: ", n, " readings in one batch: at most ", max_samples_per_batch);
    } else if (b.watts_size() != n || b.joules_size() != n) {
      c.problem = absl::StrCat("power: columns of unequal length (t_ns ", n, ", watts ", b.watts_size(), ", joules ",
                               b.joules_size(), ")");
    } else if (b.sensor().name().empty() || b.sensor().name().size() > 256) {
      c.problem = "power.sensor.name: must be 1 to 256 characters";
    }
  } else if (m.has_done()) {
    if (!IsTerminalTaskState(m.done().state())) {
      c.problem = absl::StrCat("done.state = ", TaskStateName(m.done().state()),
                               ": a TaskDone must say SUCCEEDED, FAILED or CANCELLED");
    } else if (m.done().result().has_validation()) {
      c.problem = CheckValidationRun(m.done().result().validation());
    }
  }
  return c;
}

void EchoHeartbeat(AgentSink& sink, const v1::Heartbeat& beat, const Clock& clock) {
  // Echoed at once: the agent estimates the clock offset from the round trip.
  v1::CoordinatorMessage echo;
  echo.mutable_heartbeat()->set_unix_seconds(clock.SystemNowSeconds());
  echo.mutable_heartbeat()->set_agent_ns(beat.agent_ns());
  echo.mutable_heartbeat()->set_coordinator_ns(clock.MonotonicNowNs());
  sink.Send(std::move(echo));
}

void AgentMessages::Handle(uint64_t session_id, const std::shared_ptr<AgentSink>& sink,
                           const std::shared_ptr<const v1::AgentMessage>& message, const Checked& checked) {
  const v1::AgentMessage& m = *message;
  bool opened = false;
  Session& session = p_.sessions->Open(session_id, sink, p_.clock->SystemNowSeconds(), &opened);
  session.last_seen_ns = p_.clock->MonotonicNowNs();
  session.last_seen_unix = p_.clock->SystemNowSeconds();
  p_.agents->Seen(session);
  if (m.kind_case() == v1::AgentMessage::kHello) {
    p_.agents->Hello(session_id, session, m.hello());
    return;
  }
  if (!session.has_hello) {
    p_.metrics->AddRejectedMessage("no_hello");
    sink->Close(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "send Hello first"));
    (void)p_.sessions->Close(session_id);
    return;
  }
  switch (m.kind_case()) {
    case v1::AgentMessage::kHeartbeat:
      if (m.heartbeat().agent_ns() != 0) {
        EchoHeartbeat(*sink, m.heartbeat(), *p_.clock);
        session.last_echo_ns = session.last_seen_ns;
      }
      break;
    case v1::AgentMessage::kProgress:
      Progress(session, m.progress());
      break;
    case v1::AgentMessage::kSamples:
      Samples(session, message, checked);
      break;
    case v1::AgentMessage::kDone:
      Done(session_id, session, message, checked);
      break;
    case v1::AgentMessage::kPower:
      Power(session, message, checked);
      break;
    default:
      p_.metrics->AddRejectedMessage("unknown_kind");
      break;
  }
}

void AgentMessages::Progress(Session& session, const v1::Progress& p) {
  LiveJob* job = nullptr;
  v1::Task* task = p_.agents->OwnedTask(session.hello.agent_id(), p.task_id(), p.attempt(), &job);
  if (task == nullptr) return;  // late progress of an ended attempt: harmless
  task->set_phase(p.phase());
  task->set_step(p.step());
  task->set_total_steps(p.total_steps());
  p_.watches->Changed(job->job.id(), "progress");  // live only: progress is not stored
}

void AgentMessages::Reject(Session& session, LiveJob& job, v1::Task& task, const std::string& what, uint64_t seq,
                         const std::string& reason, const std::string& metric_reason) {
  p_.metrics->AddRejectedMessage(metric_reason);
  LogWarning(kLog, "refused a ", what, " message of ", task.id(), " attempt ", task.attempt(), " from ",
             session.hello.agent_id(), ": ", reason);
  v1::CoordinatorMessage rejected;
  rejected.mutable_rejected()->set_task_id(task.id());
  rejected.mutable_rejected()->set_attempt(task.attempt());
  rejected.mutable_rejected()->set_seq(seq);
  rejected.mutable_rejected()->set_what(what);
  rejected.mutable_rejected()->set_reason(reason);
  const v1::CoordinatorMessage cancel = CancelMessage(
      task.id(), task.attempt(), absl::StrCat("a ", what, " message was refused: ", reason), /*fenced=*/true);
  auto sink = session.sink;
  defer_([sink, rejected, cancel](const absl::Status&) {
    sink->Send(rejected);
    sink->Send(cancel);
  });
  // A malformed message is the agent's bug: another attempt would repeat it.
  p_.placer->Release(task);
  p_.attempts->Finish(job, task, v1::TASK_STATE_FAILED,
             absl::StrCat("attempt ", task.attempt(), ": agent ", task.agent_id(), " sent a malformed ", what,
                          " message: ", reason));
  p_.placer->Request();
}

void AgentMessages::Samples(Session& session, const std::shared_ptr<const v1::AgentMessage>& m,
                                const Checked& checked) {
  const v1::SampleBatch& b = m->samples();
  LiveJob* job = nullptr;
  if (Admit(session, AckMessage(b.task_id(), b.attempt(), b.seq(), /*power=*/false), checked, "samples",
                     "malformed_batch", &job) == nullptr) {
    return;
  }
  std::shared_ptr<const v1::SampleBatch> batch(m, &m->samples());  // shares the message's lifetime
  p_.ingest->Write(batch, checked.summary,
                   [this, sink = session.sink, lists = session.hello.ack_lists(), m, checked](
                       const absl::StatusOr<bool>& stored, bool counted) {
                     SampleStored(sink, lists, m, checked, stored, counted);
                   });
}

void AgentMessages::SampleStored(const std::shared_ptr<AgentSink>& sink, bool ack_lists,
                                 const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked,
                                 const absl::StatusOr<bool>& stored, bool counted) {
  const v1::SampleBatch& b = m->samples();
  if (!stored.ok()) {
    LogError(kLog, "storing samples of ", b.task_id(), ": ", stored.status().ToString());
    return;  // not acked: the agent sends it again
  }
  // Counted for the attempt if it is still the running one (an attempt lost
  // meanwhile keeps its rows, not its aggregate).
  if (const v1::Task* task = counted ? p_.jobs->FindTask(b.task_id()) : nullptr) {
    p_.metrics->AddSamplesIngested(b.phase(), task->device_kind(), b.duration_ns_size());
    p_.metrics->ObserveSteps(task->model(), task->device_kind(), b.phase(), checked.steps);
  } else if (!*stored) {
    p_.metrics->AddDuplicateBatch();
  }
  Acknowledge(sink, ack_lists, AckMessage(b.task_id(), b.attempt(), b.seq(), /*power=*/false));
}

void AgentMessages::Acknowledge(const std::shared_ptr<AgentSink>& sink, bool lists, v1::CoordinatorMessage ack) {
  if (!lists) {
    sink->Send(std::move(ack));
    return;
  }
  held_.Hold(sink, std::move(ack));
}

void AgentMessages::ReleaseAcks() { held_.ReleaseAll(); }

v1::Task* AgentMessages::Admit(Session& session, const v1::CoordinatorMessage& ack, const Checked& checked,
                                      const char* what, const char* metric_reason, LiveJob** job) {
  const v1::SampleAck& a = ack.ack();
  switch (p_.agents->SettledInMemory(session.hello.agent_id(), a.task_id(), a.attempt())) {
    case AgentSessions::Settled::kYes:
      AnswerSettled(session, ack);
      return nullptr;
    case AgentSessions::Settled::kAskStore:
      p_.agents->AnswerFromStore(session.sink, session.hello.agent_id(), a.task_id(), a.attempt(), ack);
      return nullptr;
    case AgentSessions::Settled::kNo:
      break;
  }
  v1::Task* task = p_.agents->FencedTask(session, a.task_id(), a.attempt(), job);
  if (task == nullptr) return nullptr;
  if (!checked.problem.empty()) {
    Reject(session, **job, *task, what, a.seq(), checked.problem, metric_reason);
    return nullptr;
  }
  return task;
}

void AgentMessages::AnswerSettled(Session& session, v1::CoordinatorMessage ack) {
  // Sent again after a broken stream, for an attempt that has ended since:
  // its result is final, so nothing is stored; the ack lets the agent let go.
  if (!ack.ack().done()) p_.metrics->AddDuplicateBatch();
  auto sink = session.sink;
  defer_([sink, ack = std::move(ack)](const absl::Status&) { sink->Send(ack); });

}

void AgentMessages::Power(Session& session, const std::shared_ptr<const v1::AgentMessage>& m,
                               const Checked& checked) {
  const v1::PowerBatch& b = m->power();
  LiveJob* job = nullptr;
  if (Admit(session, AckMessage(b.task_id(), b.attempt(), b.seq(), /*power=*/true), checked, "power",
                     "malformed_power_batch", &job) == nullptr) {
    return;
  }
  std::shared_ptr<const v1::PowerBatch> batch(m, &m->power());
  p_.ingest->Write(
      batch, [this, sink = session.sink, lists = session.hello.ack_lists(), batch, agent = session.hello.agent_id(),
              kind = AgentSessions::SensorDeviceKind(session.hello, b.sensor().device_id())](
                 const absl::StatusOr<bool>& stored, bool counted, PowerDelta delta) {
        if (!stored.ok()) {
          LogError(kLog, "storing power readings of ", batch->task_id(), ": ", stored.status().ToString());
          return;  // not acked: the agent sends it again
        }
        const v1::PowerSource source = batch->sensor().source();
        if (counted) {  // metrics: the latest power and the energy between consecutive readings
          if (!std::isnan(delta.watts)) p_.metrics->SetPower(agent, kind, source, delta.watts);
          p_.metrics->AddEnergy(agent, kind, source, delta.joules);
          p_.metrics->AddPowerReadErrors(agent, source, batch->read_errors());
        } else if (!*stored) {
          p_.metrics->AddDuplicateBatch();
        }
        Acknowledge(sink, lists, AckMessage(batch->task_id(), batch->attempt(), batch->seq(), /*power=*/true));
      });
}

void AgentMessages::Done(uint64_t session_id, Session& session, const std::shared_ptr<const v1::AgentMessage>& m,
                             const Checked& checked) {
  const v1::TaskDone& d = m->done();
  v1::CoordinatorMessage ack = AckMessage(d.task_id(), d.attempt(), 0, /*power=*/false);
  ack.mutable_ack()->set_done(true);
  LiveJob* job = nullptr;
  v1::Task* task = Admit(session, ack, checked, "done", "bad_task_done", &job);
  if (task == nullptr) return;
  // Judged once the writer has stored the batches sent before it.
  if (p_.ingest->AfterWrites(d.task_id(), d.attempt(), [this, session_id, m, checked] {
        Session* now = p_.sessions->Find(session_id);
        if (now != nullptr) Done(session_id, *now, m, checked);  // else the agent sends it again
      })) {
    return;
  }
  p_.placer->Release(*task);
  *task->mutable_result() = d.result();
  task->mutable_result()->clear_phases();
  task->mutable_result()->set_partial(d.state() == v1::TASK_STATE_CANCELLED);
  // A simulated device's result says so, whatever the agent wrote.
  for (const v1::Device& device : session.hello.devices()) {
    if (device.id() == task->device_id() && device.simulated()) {
      task->mutable_result()->mutable_environment()->set_simulated(true);
      if (task->result().has_validation()) task->mutable_result()->mutable_validation()->set_simulated(true);
    }
  }

  // The phases come from the aggregate built batch by batch at ingest:
  // bounded work here whatever the task's sample count.
  v1::TaskState state = d.state();
  std::string error = d.error();
  Ingest::Collected collected = p_.ingest->Take(task->id(), task->attempt());
  const TaskAggregate& agg = collected.samples;
  task->mutable_result()->set_samples_stored(agg.samples_stored);
  const v1::JobSpec& spec = job->job.spec();
  // A serving run is judged once, after its TTFT and TPOT phases are read.
  int serve_index = -1;
  std::vector<int64_t> serve_latencies;
  GenerativeTimes generative;
  for (const auto& [phase, acc] : agg.phases) {
    v1::PhaseResult* pr = task->mutable_result()->add_phases();
    pr->set_phase(phase);
    *pr->mutable_stats() = acc.Finish();
    if (phase == v1::PHASE_SERVE) {
      serve_index = task->result().phases_size() - 1;
      serve_latencies = acc.SortedExact();
      continue;
    }
    if (phase == v1::PHASE_TTFT || phase == v1::PHASE_TPOT) {
      (phase == v1::PHASE_TTFT ? generative.ttft : generative.tpot) = acc.SortedExact();
      (phase == v1::PHASE_TTFT ? generative.ttft_stored : generative.tpot_stored) = pr->stats().count();
      continue;
    }
    // Training: the steps the agent's executor aimed for, computed there once.
    const int64_t expected = phase == v1::PHASE_TRAIN
                                 ? d.result().min_train_steps()
                                 : ExpectedInferenceBatches(spec, task->batch_size(), d.result().dataset_test_size());
    JudgeValidity(spec, expected, pr, &d.result().calibration(), &acc.InOrder());
  }
  if (IsServing(spec) && serve_index < 0 && d.state() == v1::TASK_STATE_SUCCEEDED) {
    task->mutable_result()->add_phases()->set_phase(v1::PHASE_SERVE);  // nothing answered: said so, not left out
    serve_index = task->result().phases_size() - 1;
  }
  // A replica of a replicated run is judged on its share of min_queries;
  // the union of its gang's replicas on the whole spec (MergeReplica).
  const bool replica = IsServing(spec) && task->has_gang() && task->gang().world_size() > 1;
  v1::JobSpec share;
  if (replica) {
    share = spec;
    const int64_t n = task->gang().world_size();
    share.mutable_serving()->set_min_queries((spec.serving().min_queries() + n - 1) / n);
  }
  if (serve_index >= 0) {
    // Percentiles and the verdict from every stored latency, exactly; a
    // generative run's TTFT and TPOT phases carry the run's one verdict.
    v1::PhaseResult* pr = task->mutable_result()->mutable_phases(serve_index);
    JudgeServing(replica ? share : spec, serve_latencies, task->mutable_result()->mutable_serving(), pr, &d.result().calibration(),
                 IsGenerative(spec) ? &generative : nullptr);
    for (v1::PhaseResult& other : *task->mutable_result()->mutable_phases()) {
      if (other.phase() != v1::PHASE_TTFT && other.phase() != v1::PHASE_TPOT) continue;
      other.set_valid(pr->valid());
      *other.mutable_invalid_reasons() = pr->invalid_reasons();
    }
  }
  if (state == v1::TASK_STATE_SUCCEEDED &&
      (static_cast<uint64_t>(agg.batches_stored) != d.batches_sent() || agg.samples_stored != d.samples_sent())) {
    state = v1::TASK_STATE_FAILED;
    error = absl::StrCat("incomplete samples: stored ", agg.batches_stored, " of ", d.batches_sent(), " batches and ",
                         agg.samples_stored, " of ", d.samples_sent(), " samples");
  }
  if (state == v1::TASK_STATE_SUCCEEDED && collected.power.size() != d.power_batches_sent()) {
    state = v1::TASK_STATE_FAILED;
    error = absl::StrCat("incomplete power readings: stored ", collected.power.size(), " of ", d.power_batches_sent(),
                         " batches");
  }
  if (replica && state == v1::TASK_STATE_SUCCEEDED && serve_index >= 0) {
    MergeReplica(*job, *task, d, std::move(serve_latencies), task->result().phases(serve_index));
  }
  ComputeEnergyAndCost(spec, session.hello, collected.power, task);
  auto sink = session.sink;
  defer_([sink, ack](const absl::Status& commit) {
    if (commit.ok()) sink->Send(ack);
  });
  p_.placer->Request();
  if (state == v1::TASK_STATE_FAILED && d.state() == v1::TASK_STATE_FAILED && d.retryable()) {
    // Another attempt may not meet the same condition (device busy, out of memory).
    p_.metrics->AddTaskRetried();
    p_.attempts->RequeueOrFail(*job, *task, absl::StrCat("attempt ", task->attempt(), " failed: ", error), /*restart=*/false);
    return;
  }
  p_.attempts->Finish(*job, *task, state, error);
}

void AgentMessages::MergeReplica(LiveJob& job, v1::Task& task, const v1::TaskDone& d, std::vector<int64_t> latencies,
                                 const v1::PhaseResult& phase) {
  const v1::TaskResult& r = task.result();
  ReplicaPart part;
  part.task_id = task.id();
  part.rank = task.gang().rank();
  part.attempt = task.attempt();
  part.sorted_latencies = std::move(latencies);
  part.stored = phase.stats().count();
  part.items = phase.stats().items();
  for (const v1::PhaseWindow& w : d.result().windows()) {  // on the task's axis; to the coordinator's clock
    if (w.phase() != v1::PHASE_SERVE) continue;
    part.window_start_coordinator_ns = r.clock().task_start_coordinator_ns() + w.start_ns();
    part.window_end_coordinator_ns = r.clock().task_start_coordinator_ns() + w.end_ns();
  }
  part.queries_scheduled = r.serving().queries_scheduled();
  part.queries_answered = r.serving().queries_answered();
  part.issue_delay_p99_ns = r.serving().issue_delay_p99_ns();
  part.clock_bound_ns = r.serving().replica().clock_bound_ns();
  part.target_qps = r.serving().target_qps();
  std::optional<std::vector<ReplicaPart>> parts =
      p_.ingest->replicas().Add(task.gang().id(), task.gang().world_size(), std::move(part));
  if (!parts) return;
  const v1::ReplicaMerge merged = MergeReplicas(job.job.spec(), *parts);
  // Every replica's task holds the union's figures; the others ended earlier.
  for (v1::Task& t : *job.job.mutable_tasks()) {
    if (t.gang().id() != task.gang().id()) continue;
    *t.mutable_result()->mutable_serving()->mutable_merged() = merged;
    if (&t != &task) p_.jobs->MarkTask(job, t);
  }
}

}  // namespace hetbench::server
