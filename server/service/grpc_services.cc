#include "server/service/grpc_services.h"

#include "server/service/reactor_sink.h"

#include <chrono>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_util.h"

namespace hetbench::server {

namespace {

/// One unary call: its reactor and the timer that records it. Copyable, so a
/// completion callback can hold it. Every unary handler starts with
/// BeginUnary and ends each path with Finish.
struct UnaryCall {
  grpc::ServerUnaryReactor* reactor;
  RpcTimer timer;
  bool refused = false;  // the caller was not authorized; already finished

  void Finish(const grpc::Status& status) const {
    timer.Done(status);
    reactor->Finish(status);
  }
};

/// Starts a unary call of `method`: times it and checks the caller's role
/// (a refused call is finished here, with `refused` set).
UnaryCall BeginUnary(grpc::CallbackServerContext* ctx, Metrics* metrics, const Authorizer& auth, const char* method,
                     Role role = Role::kClient) {
  UnaryCall call{ctx->DefaultReactor(), RpcTimer(metrics, method)};
  if (grpc::Status denied = auth.Check(*ctx, role); !denied.ok()) {
    call.Finish(denied);
    call.refused = true;
  }
  return call;
}

class AgentStream;

/// An agent stream's sink, which also keeps its read window: at most
/// kReadWindow messages of one stream wait for the event loop, and all
/// streams together at most the IngestGate's budget of samples; the next
/// read starts when the loop has handled one (Handled) and both allow it. A
/// coordinator that falls behind thus slows its agents through HTTP/2 flow
/// control instead of queueing without bound.
class AgentStreamSink final : public ReactorSink<AgentStream, v1::CoordinatorMessage>,
                              public GateWaiter,
                              public std::enable_shared_from_this<AgentStreamSink> {
 public:
  static constexpr int kReadWindow = 16;
  static constexpr size_t kMaxQueue = 8192;
  AgentStreamSink(AgentStream* reactor, Metrics* metrics, IngestGate* gate)
      : ReactorSink(reactor, RpcTimer(metrics, "Connect"), metrics, "agent", /*coalesce=*/false, kMaxQueue),
        gate_(gate) {}

  /// A message costing `units` was read: count it against the window and the
  /// gate. Before it is posted, so the loop's Handled always finds it.
  void Accepted(int64_t units);
  /// After posting it: read the next one if the window and the gate allow.
  void ReadNext();
  void Handled() override;
  void Resume() override;
  bool ReadsHeldBack() const override {
    absl::MutexLock l(&mu_);
    return paused_ && !reads_ended_;
  }
  /// No more reads (the agent half-closed or the stream broke).
  void ReadsEnded() {
    absl::MutexLock l(&mu_);
    reads_ended_ = true;
  }

 private:
  /// Reads on, or pauses until Handled or the gate resumes it.
  void ReadOrPauseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  IngestGate* const gate_;
  std::deque<int64_t> units_ ABSL_GUARDED_BY(mu_);  // of the messages the loop has not handled, in order
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
};

class AgentStream final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  AgentStream(Coordinator* coordinator, Metrics* metrics, IngestGate* gate, grpc::CallbackServerContext* ctx)
      : coordinator_(coordinator),
        session_(coordinator->NewSessionId()),
        peer_(ctx->peer()),
        sink_(std::make_shared<AgentStreamSink>(this, metrics, gate)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent half-closed or the stream broke
      sink_->ReadsEnded();
      coordinator_->OnAgentGone(session_, "stream closed by " + peer_);
      sink_->Close(grpc::Status::OK);
      return;
    }
    // A heartbeat of a welcomed stream is handled here, off the loop.
    if (in_.has_heartbeat() && coordinator_->EdgeHeartbeat(session_, *sink_, in_)) {
      in_.Clear();
      sink_->ReadNext();
      return;
    }
    // Counted before it is posted: the loop may handle it (and release its
    // units) before this thread goes on; counting after let the gate leak
    // those units and a stream's window keep a stale entry, until every
    // stream waited on a gate that would never open (bench_fleet --mode
    // serving at 1,000 agents x 20,000 q/s stalled at ~2 M samples).
    sink_->Accepted(GateUnits(in_));
    coordinator_->OnAgentMessage(session_, sink_, std::move(in_));
    in_.Clear();
    sink_->ReadNext();
  }

  void OnWriteDone(bool ok) override { sink_->WriteDone(ok); }

  void OnDone() override {
    sink_->Detach();
    coordinator_->OnAgentGone(session_, "stream ended");
    delete this;
  }

  void ReadAgain() { StartRead(&in_); }

 private:
  Coordinator* const coordinator_;
  const uint64_t session_;
  const std::string peer_;
  std::shared_ptr<AgentStreamSink> sink_;
  v1::AgentMessage in_;
};

void AgentStreamSink::Accepted(int64_t units) {
  gate_->Add(units);
  absl::MutexLock l(&mu_);
  units_.push_back(units);
}

void AgentStreamSink::ReadNext() {
  absl::MutexLock l(&mu_);
  ReadOrPauseLocked();
}

void AgentStreamSink::ReadOrPauseLocked() {
  if (reactor_ == nullptr || reads_ended_) return;
  paused_ = true;
  if (units_.size() >= static_cast<size_t>(kReadWindow)) return;  // Handled resumes it
  if (!gate_->RoomOrPark(weak_from_this())) return;               // the gate resumes it
  paused_ = false;
  reactor_->ReadAgain();
}

void AgentStreamSink::Handled() {
  // The loop handles one stream's messages in the order they were posted.
  int64_t units = 0;
  {
    absl::MutexLock l(&mu_);
    if (!units_.empty()) {
      units = units_.front();
      units_.pop_front();
    }
  }
  gate_->Release(units);
  Resume();
}

void AgentStreamSink::Resume() {
  absl::MutexLock l(&mu_);
  if (paused_) ReadOrPauseLocked();
}

class WatchStream final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchStream(Coordinator* coordinator, Metrics* metrics, const std::string& job_id, v1::JobView view)
      : sink_(std::make_shared<ReactorSink<WatchStream, v1::JobEvent>>(this, RpcTimer(metrics, "WatchJob"), metrics,
                                                                       "watch", /*coalesce=*/true, 2)) {
    coordinator->api().WatchJob(job_id, view == v1::JOB_VIEW_SUMMARY, sink_);
  }
  void OnWriteDone(bool ok) override { sink_->WriteDone(ok); }
  void OnCancel() override { sink_->Close(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled")); }
  void OnDone() override {
    sink_->Detach();
    delete this;
  }

 private:
  std::shared_ptr<ReactorSink<WatchStream, v1::JobEvent>> sink_;
};

constexpr int kDefaultTaskPageSize = 256;
constexpr int kMaxTaskPageSize = 1024;

/// Keeps tasks [first, first + size) of `job` and says where the next page starts.
void PageTasks(v1::Job* job, int first, int size) {
  auto* tasks = job->mutable_tasks();
  const int n = tasks->size();
  const int end = std::min(n, first + size);
  if (first > 0) tasks->DeleteSubrange(0, std::min(first, n));
  if (end < n) {
    tasks->DeleteSubrange(end - std::min(first, n), n - end);
    job->set_next_task_page_token(absl::StrCat(end));
  }
}

/// A streaming call refused before it started (authorization).
template <typename Base>
class Refused final : public Base {
 public:
  Refused(Metrics* metrics, const char* method, const grpc::Status& status) {
    RpcTimer(metrics, method).Done(status);
    this->Finish(status);
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::SubmitJob(grpc::CallbackServerContext* ctx,
                                                        const v1::SubmitJobRequest* request,
                                                        v1::SubmitJobResponse* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "SubmitJob");
  if (call.refused) return call.reactor;
  const auto deadline = ctx->deadline();
  const absl::Time until =
      deadline == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture() : absl::FromChrono(deadline);
  coordinator_->api().SubmitJob(request->spec(), request->request_id(), until,
                          [call, response](absl::StatusOr<Coordinator::Submitted> submitted) {
                            if (submitted.ok()) {
                              response->set_job_id(submitted->job.id());
                              response->set_existing(submitted->existing);
                              *response->mutable_job() = std::move(submitted->job);
                            }
                            call.Finish(ToGrpcStatus(submitted.status()));
                          });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetJob(grpc::CallbackServerContext* ctx, const v1::GetJobRequest* request,
                                                     v1::Job* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "GetJob");
  if (call.refused) return call.reactor;
  const bool summary = request->view() == v1::JOB_VIEW_SUMMARY;
  int first = 0;
  if (!request->task_page_token().empty() && (!absl::SimpleAtoi(request->task_page_token(), &first) || first <= 0)) {
    call.Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "task_page_token: not a token this coordinator gave; start without one"));
    return call.reactor;
  }
  const int size =
      request->task_page_size() <= 0 ? kDefaultTaskPageSize : std::min(request->task_page_size(), kMaxTaskPageSize);
  coordinator_->api().GetJob(request->job_id(),
                       [call, response, summary, first, size](absl::StatusOr<v1::Job> job) {
                         if (job.ok()) {
                           *response = *std::move(job);
                           PageTasks(response, first, size);
                           if (summary) StripResults(response);
                         }
                         call.Finish(ToGrpcStatus(job.status()));
                       });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::ListJobs(grpc::CallbackServerContext* ctx,
                                                       const v1::ListJobsRequest* request,
                                                       v1::ListJobsResponse* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "ListJobs");
  if (call.refused) return call.reactor;
  JobFilter filter;
  filter.page_size = request->page_size() > 0 ? request->page_size() : request->limit();
  filter.page_token = request->page_token();
  filter.state = request->state();
  filter.model = request->model();
  filter.device_kind = request->device_kind();
  coordinator_->api().ListJobs(std::move(filter), [call, response](absl::StatusOr<JobPage> page) {
    if (page.ok()) {
      for (v1::Job& j : page->jobs) *response->add_jobs() = std::move(j);
      response->set_next_page_token(page->next_page_token);
    }
    call.Finish(ToGrpcStatus(page.status()));
  });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::CancelJob(grpc::CallbackServerContext* ctx,
                                                        const v1::CancelJobRequest* request, v1::Job* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "CancelJob");
  if (call.refused) return call.reactor;
  coordinator_->api().CancelJob(request->job_id(), [call, response](absl::StatusOr<v1::Job> job) {
    if (job.ok()) *response = *std::move(job);
    call.Finish(ToGrpcStatus(job.status()));
  });
  return call.reactor;
}

grpc::ServerWriteReactor<v1::JobEvent>* CoordinatorService::WatchJob(grpc::CallbackServerContext* ctx,
                                                                     const v1::WatchJobRequest* request) {
  if (grpc::Status denied = auth_->Check(*ctx, Role::kClient); !denied.ok()) {
    return new Refused<grpc::ServerWriteReactor<v1::JobEvent>>(metrics_, "WatchJob", denied);
  }
  return new WatchStream(coordinator_, metrics_, request->job_id(), request->view());
}

grpc::ServerUnaryReactor* CoordinatorService::ListAgents(grpc::CallbackServerContext* ctx,
                                                         const v1::ListAgentsRequest* /*request*/,
                                                         v1::ListAgentsResponse* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "ListAgents");
  if (call.refused) return call.reactor;
  coordinator_->api().ListAgents([call, response](std::vector<v1::AgentInfo> agents) {
    for (v1::AgentInfo& a : agents) *response->add_agents() = std::move(a);
    call.Finish(grpc::Status::OK);
  });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetTaskData(grpc::CallbackServerContext* ctx,
                                                          const v1::GetTaskDataRequest* request,
                                                          v1::TaskData* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "GetTaskData");
  if (call.refused) return call.reactor;
  coordinator_->api().GetTaskData(*request, [call, response](absl::StatusOr<v1::TaskData> data) {
    if (data.ok()) *response = std::move(*data);
    call.Finish(ToGrpcStatus(data.status()));
  });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::SaveBaseline(grpc::CallbackServerContext* ctx,
                                                           const v1::SaveBaselineRequest* request,
                                                           v1::Baseline* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "SaveBaseline");
  if (call.refused) return call.reactor;
  coordinator_->api().SaveBaseline(request->baseline(), [call, response](absl::StatusOr<v1::Baseline> saved) {
    if (saved.ok()) *response = std::move(*saved);
    call.Finish(ToGrpcStatus(saved.status()));
  });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetBaseline(grpc::CallbackServerContext* ctx,
                                                          const v1::GetBaselineRequest* request,
                                                          v1::Baseline* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "GetBaseline");
  if (call.refused) return call.reactor;
  coordinator_->api().GetBaseline(request->name(), request->version(),
                                  [call, response](absl::StatusOr<v1::Baseline> found) {
                                    if (found.ok()) *response = std::move(*found);
                                    call.Finish(ToGrpcStatus(found.status()));
                                  });
  return call.reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::ListBaselines(grpc::CallbackServerContext* ctx,
                                                            const v1::ListBaselinesRequest* request,
                                                            v1::ListBaselinesResponse* response) {
  const UnaryCall call = BeginUnary(ctx, metrics_, *auth_, "ListBaselines");
  if (call.refused) return call.reactor;
  coordinator_->api().ListBaselines(request->name(),
                                    [call, response](absl::StatusOr<std::vector<v1::Baseline>> list) {
                                      if (list.ok()) {
                                        for (v1::Baseline& b : *list) *response->add_baselines() = std::move(b);
                                      }
                                      call.Finish(ToGrpcStatus(list.status()));
                                    });
  return call.reactor;
}

grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* AgentGatewayService::Connect(
    grpc::CallbackServerContext* ctx) {
  if (grpc::Status denied = auth_->Check(*ctx, Role::kAgent); !denied.ok()) {
    return new Refused<grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>>(metrics_, "Connect", denied);
  }
  return new AgentStream(coordinator_, metrics_, &gate_, ctx);
}

}  // namespace hetbench::server
