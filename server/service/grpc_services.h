#pragma once
/// gRPC callback services. Reactions copy the message, hand it to the
/// Coordinator's event loop and return; no thread per stream.

#include "common/security.h"
#include "hetbench/v1/agent.grpc.pb.h"
#include "hetbench/v1/coordinator.grpc.pb.h"
#include "server/service/coordinator.h"
#include "server/service/ingest_gate.h"

namespace hetbench::server {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  /// `metrics` may be null (no RPC metrics). `auth` checks every call (client role) and must outlive the service.
  CoordinatorService(Coordinator* coordinator, Metrics* metrics, const Authorizer* auth)
      : coordinator_(coordinator), metrics_(metrics), auth_(auth) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx, const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const v1::GetJobRequest* request,
                                   v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx, const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx, const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* ctx,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx, const v1::ListAgentsRequest* request,
                                       v1::ListAgentsResponse* response) override;
  grpc::ServerUnaryReactor* GetTaskData(grpc::CallbackServerContext* ctx, const v1::GetTaskDataRequest* request,
                                        v1::TaskData* response) override;
  grpc::ServerUnaryReactor* SaveBaseline(grpc::CallbackServerContext* ctx, const v1::SaveBaselineRequest* request,
                                         v1::Baseline* response) override;
  grpc::ServerUnaryReactor* GetBaseline(grpc::CallbackServerContext* ctx, const v1::GetBaselineRequest* request,
                                        v1::Baseline* response) override;
  grpc::ServerUnaryReactor* ListBaselines(grpc::CallbackServerContext* ctx, const v1::ListBaselinesRequest* request,
                                          v1::ListBaselinesResponse* response) override;

 private:
  Coordinator* const coordinator_;
  Metrics* const metrics_;
  const Authorizer* const auth_;
};

class AgentGatewayService final : public v1::AgentGateway::CallbackService {
 public:
  /// `max_queued_samples`: what all agent streams together may have waiting
  /// for the event loop (see IngestGate).
  AgentGatewayService(Coordinator* coordinator, Metrics* metrics, const Authorizer* auth,
                      int64_t max_queued_samples = kDefaultMaxQueuedSamples)
      : coordinator_(coordinator), metrics_(metrics), auth_(auth), gate_(max_queued_samples) {}
  /// About 5 ms of the loop's ingest work on the development VM.
  static constexpr int64_t kDefaultMaxQueuedSamples = 131072;

  grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* Connect(grpc::CallbackServerContext* ctx) override;

 private:
  Coordinator* const coordinator_;
  Metrics* const metrics_;
  const Authorizer* const auth_;
  IngestGate gate_;
};

}  // namespace hetbench::server
