#include "server/service/job_api.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/job_spec.h"
#include "common/log.h"
#include "common/names.h"
#include "common/validate_spec.h"
#include "server/validation/expand.h"
#include "server/service/attempts.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
constexpr size_t kMaxRequestIdLength = 128;
constexpr int kMaxPageSize = 1000;
constexpr size_t kMaxModelFilterLength = 128;

// An id as errors quote it: whole up to 64 characters, else its start and
// length (an id is the caller's input: never echoed whole).
absl::Status JobNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job ", QuotedInput(id), " not found; list jobs with `hetbench get jobs`"));
}

// An ended (or unknown: NOT_FOUND) job from the store; on a StoreReader's thread.
absl::StatusOr<v1::Job> StoredJob(JobStore& store, const std::string& job_id) {
  auto stored = store.GetJob(job_id);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return JobNotFound(job_id);
  return **std::move(stored);
}

absl::Status Busy(size_t depth) {
  return absl::ResourceExhaustedError(absl::StrCat("coordinator busy: ", depth,
                                                   " requests queued; retry in 1 s (a submit with the same request "
                                                   "id is safe to retry)"));
}

}  // namespace

void JobApi::SubmitJob(v1::JobSpec spec, JobCallback done) {
  SubmitJob(std::move(spec), "", absl::InfiniteFuture(), [done = std::move(done)](absl::StatusOr<Submitted> s) {
    if (!s.ok()) {
      done(s.status());
    } else {
      done(std::move(s->job));
    }
  });
}

void JobApi::SubmitJob(v1::JobSpec spec, std::string request_id, absl::Time deadline,
                            std::function<void(absl::StatusOr<Submitted>)> done) {
  // The edge: work proportional to the spec's size happens here, on the
  // caller's thread, never on the loop.
  if (request_id.size() > kMaxRequestIdLength ||
      std::any_of(request_id.begin(), request_id.end(), [](char c) { return c < 0x21 || c > 0x7e; })) {
    done(absl::InvalidArgumentError(absl::StrCat(
        "request_id: ", request_id.size(), " characters: use 1 to 128 printable ASCII characters without spaces")));
    return;
  }
  UpgradeOldSpellings(&spec);  // an older client's spelling; a current CLI has already said so
  v1::JobSpec effective = WithDefaults(std::move(spec));
  if (absl::Status s = ValidateJobSpec(effective); !s.ok()) {
    p_.metrics->AddSpecRefused();
    done(s);
    return;
  }
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<Submitted>)>>(std::move(done));
  const bool posted = Post(
      [this, effective = std::move(effective), request_id = std::move(request_id), deadline, shared_done]() mutable {
        if (absl::Now() > deadline) {
          // The client gave up waiting: creating the job now would leave one it never heard of.
          (*shared_done)(absl::DeadlineExceededError(
              "the request waited past its deadline in the coordinator's queue and was not carried out; nothing "
              "was created; submit again (with the same request id)"));
          return;
        }
        CreateJob(std::move(effective), request_id, std::move(*shared_done));
      });
  if (!posted) {
    p_.metrics->AddRequestShed("SubmitJob");
    (*shared_done)(Busy(p_.loop->depth()));
  }
}

void JobApi::AnswerExisting(const std::string& existing, std::function<void(absl::StatusOr<Submitted>)> done) {
  p_.loop->Defer([this, existing, done = std::move(done)](const absl::Status&) {
    GetJob(existing, [done](absl::StatusOr<v1::Job> job) {
      if (!job.ok()) {
        done(job.status());
      } else {
        done(Submitted{*std::move(job), /*existing=*/true});
      }
    });
  });
}

void JobApi::CreateJob(v1::JobSpec effective, const std::string& request_id,
                       std::function<void(absl::StatusOr<Submitted>)> done, std::optional<std::string> stored) {
  if (!request_id.empty()) {
    if (std::optional<std::string> live = p_.jobs->JobForRequest(request_id)) {
      AnswerExisting(*live, std::move(done));
      return;
    }
    if (!stored.has_value()) {
      // Not in memory: an ended job's request is in the store. Read it off
      // the loop, then come back (memory is checked again then: the same
      // request may have made its job meanwhile).
      auto shared = std::make_shared<std::tuple<v1::JobSpec, std::string, std::function<void(absl::StatusOr<Submitted>)>>>(
          std::move(effective), request_id, std::move(done));
      ended_reader_->Submit(
          [this, shared](JobStore& store) {
            absl::StatusOr<std::string> found = store.FindRequest(std::get<1>(*shared));
            if (!found.ok()) {
              std::get<2>(*shared)(found.status());
              return;
            }
            const bool posted = p_.loop->Post([this, shared, found = *std::move(found)]() mutable {
              auto& [spec, id, answer] = *shared;
              CreateJob(std::move(spec), id, std::move(answer), std::move(found));
            });
            if (!posted) {  // only when the loop is stopping
              std::get<2>(*shared)(absl::UnavailableError("coordinator shutting down; nothing was created; submit again"));
            }
          },
          [shared](absl::Status refused) { std::get<2>(*shared)(std::move(refused)); });
      return;
    }
    if (!stored->empty()) {
      AnswerExisting(*stored, std::move(done));
      return;
    }
  }
  std::vector<v1::DeviceVerdict> skipped;
  std::vector<std::pair<size_t, size_t>> pairs;  // the all-reduce pairs (indices into the targets)
  if (IsValidate(effective)) {  // a task per matching device of the agents connected now
    std::vector<const v1::Hello*> agents;
    p_.sessions->ForEachConnected([&agents](const std::string&, const Session& s) {
      if (s.has_hello) agents.push_back(&s.hello);
    });
    ExpandedValidation expanded = ExpandValidation(effective, agents);
    if (absl::Status fits = CheckBaselineFits(effective, expanded, agents); !fits.ok()) {
      p_.metrics->AddSpecRefused();
      done(fits);  // nothing created
      return;
    }
    effective.clear_targets();
    for (v1::TargetSelector& t : expanded.targets) *effective.add_targets() = std::move(t);
    skipped = std::move(expanded.skipped);
    pairs = std::move(expanded.pairs);
  }
  LiveJob& created = p_.jobs->Create(std::move(effective), request_id, p_.clock->SystemNowSeconds());
  if (!pairs.empty()) p_.jobs->AddPairGangs(created, pairs, p_.clock->SystemNowSeconds());
  for (v1::DeviceVerdict& d : skipped) *created.job.mutable_validation()->add_devices() = std::move(d);
  if (created.job.tasks_size() == 0) p_.jobs->Recompute(created, p_.clock->SystemNowSeconds());  // nothing to run
  // One copy, written by the loop's writer and then the answer.
  auto job = std::make_shared<const v1::Job>(created.job);
  p_.loop->Write([job, request_id](JobStore& store) { return store.InsertJob(*job, request_id); });
  LogInfo(kLog, "accepted ", job->id(), " (", absl::StrJoin(job->spec().models(), ", "), "; ", job->tasks_size(),
          " tasks)");
  p_.placer->Request();
  p_.loop->Defer([job, done = std::move(done)](const absl::Status& commit) {
    if (!commit.ok()) {
      done(absl::UnavailableError(absl::StrCat("job not stored: ", commit.message(), "; submit again")));
      return;
    }
    done(Submitted{*job, false});
  });
}

absl::Status JobApi::NotCommitted(const absl::Status& commit) {
  return absl::UnavailableError(
      absl::StrCat("the coordinator reloaded its state after a failed commit (", commit.message(), "); ask again"));
}

void JobApi::GetJob(std::string job_id, JobCallback done) {
  // Reads answer after the commit of their batch, so they never show a state
  // that could still be rolled back. An ended job is read from the store.
  auto shared_done = std::make_shared<JobCallback>(std::move(done));
  const bool posted = Post([this, job_id = std::move(job_id), shared_done] {
    if (LiveJob* live = p_.jobs->Find(job_id)) {
      // The state as of this batch, answered once it is committed.
      p_.loop->Defer([job = live->job, shared_done](const absl::Status& commit) {
        if (!commit.ok()) {
          (*shared_done)(NotCommitted(commit));
        } else {
          (*shared_done)(job);
        }
      });
      return;
    }
    // Ended (a job leaves memory once its end is committed) or unknown: read off the loop.
    ended_reader_->Submit([job_id, shared_done](JobStore& store) { (*shared_done)(StoredJob(store, job_id)); },
                          [shared_done](absl::Status refused) { (*shared_done)(std::move(refused)); });
  });
  if (!posted) {
    p_.metrics->AddRequestShed("GetJob");
    (*shared_done)(Busy(p_.loop->depth()));
  }
}

void JobApi::CancelJob(std::string job_id, JobCallback done) {
  auto shared_done = std::make_shared<JobCallback>(std::move(done));
  const bool posted = Post([this, job_id = std::move(job_id), shared_done] {
    JobCallback& done = *shared_done;
    LiveJob* live = p_.jobs->Find(job_id);
    if (live == nullptr) {  // ended or unknown: read off the loop
      ended_reader_->Submit(
          [job_id, shared_done](JobStore& store) {
            auto stored = StoredJob(store, job_id);
            if (!stored.ok()) {
              (*shared_done)(stored.status());
              return;
            }
            (*shared_done)(absl::FailedPreconditionError(absl::StrCat(
                "job ", QuotedInput(job_id), " already ended as ", JobStateName(stored->state()), "; nothing to cancel")));
          },
          [shared_done](absl::Status refused) { (*shared_done)(std::move(refused)); });
      return;
    }
    v1::Job* job = &live->job;
    job->set_state(v1::JOB_STATE_CANCELLED);
    job->set_finished_unix_seconds(p_.clock->SystemNowSeconds());
    job->set_error("cancelled by user");
    p_.jobs->MarkHeader(*live);
    bool running = false;
    for (v1::Task& task : *job->mutable_tasks()) {
      if (task.state() == v1::TASK_STATE_QUEUED) {
        task.set_state(v1::TASK_STATE_CANCELLED);
        task.clear_pending_reason();
        p_.jobs->MarkTask(*live, task);
      } else if (task.state() == v1::TASK_STATE_RUNNING) {
        running = true;
        // The device stays leased until the agent confirms the work stopped.
        if (const Session* session = p_.sessions->OfAgent(task.agent_id())) {
          v1::CoordinatorMessage msg = CancelMessage(task.id(), task.attempt(), "job cancelled by user", false);
          p_.loop->Defer([sink = session->sink, msg](const absl::Status&) { sink->Send(msg); });
        }
      }
    }
    if (!running) p_.jobs->EndAfterCommit(*live);
    p_.watches->Changed(live->job.id(), "job cancelled");
    v1::Job snapshot = *job;
    p_.loop->Defer([snapshot = std::move(snapshot), shared_done](const absl::Status& commit) {
      if (!commit.ok()) {
        (*shared_done)(absl::UnavailableError(absl::StrCat("cancel not stored: ", commit.message(), "; try again")));
        return;
      }
      (*shared_done)(snapshot);
    });
  });
  if (!posted) {
    p_.metrics->AddRequestShed("CancelJob");
    (*shared_done)(Busy(p_.loop->depth()));
  }
}

void JobApi::ListJobs(JobFilter filter, std::function<void(absl::StatusOr<JobPage>)> done) {
  // Matched literally (no wildcards); a model name is short.
  if (filter.model.size() > kMaxModelFilterLength) {
    done(absl::InvalidArgumentError(absl::StrCat("model: ", QuotedInput(filter.model), " is not a model name (at most ",
                                                 kMaxModelFilterLength, " characters); the zoo is in docs/models.md")));
    return;
  }
  if (filter.page_size <= 0) filter.page_size = 50;
  filter.page_size = std::min(filter.page_size, kMaxPageSize);
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<JobPage>)>>(std::move(done));
  if (!ended_reader_) {
    (*shared_done)(absl::UnavailableError("coordinator not started"));
    return;
  }
  // One page of committed rows, read off the loop; then, on the loop, live
  // jobs' current progress laid over it. A job that ended between the two
  // keeps its row as the page read it.
  ended_reader_->Submit(
      [this, filter = std::move(filter), shared_done](JobStore& store) {
        auto page = std::make_shared<absl::StatusOr<JobPage>>(store.ListJobs(filter));
        if (!page->ok() || (*page)->jobs.empty()) {
          (*shared_done)(std::move(*page));
          return;
        }
        const bool posted = Post([this, page, shared_done] {
          for (v1::Job& job : (*page)->jobs) {
            if (LiveJob* live = p_.jobs->Find(job.id())) {
              job = live->job;
              StripResults(&job);
            }
          }
          p_.loop->Defer([page, shared_done](const absl::Status& commit) {  // committed state only
            if (!commit.ok()) {
              (*shared_done)(NotCommitted(commit));
            } else {
              (*shared_done)(std::move(*page));
            }
          });
        });
        if (!posted) {
          p_.metrics->AddRequestShed("ListJobs");
          (*shared_done)(Busy(p_.loop->depth()));
        }
      },
      [shared_done](absl::Status refused) { (*shared_done)(std::move(refused)); });
}

void JobApi::GetTaskData(v1::GetTaskDataRequest request, std::function<void(absl::StatusOr<v1::TaskData>)> done) {
  if (!task_data_reader_) {
    done(absl::UnavailableError("coordinator not started"));
    return;
  }
  task_data_reader_->Read(std::move(request), std::move(done));
}

void JobApi::WatchJob(std::string job_id, bool summary, std::shared_ptr<WatchSink> sink) {
  const bool posted = Post([this, job_id = std::move(job_id), summary, sink] {
    if (p_.watches->closed()) {
      sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
      return;
    }
    LiveJob* live = p_.jobs->Find(job_id);
    if (live == nullptr) {
      // Ended (jobs leave memory once their end is committed) or unknown:
      // the snapshot is all there is, read off the loop.
      ended_reader_->Submit(
          [job_id, summary, sink](JobStore& store) {
            auto stored = StoredJob(store, job_id);
            if (!stored.ok()) {
              sink->Close(grpc::Status(static_cast<grpc::StatusCode>(stored.status().code()),
                                       std::string(stored.status().message())));
              return;
            }
            v1::JobEvent event;
            event.set_message("snapshot");
            *event.mutable_job() = *std::move(stored);
            if (summary) StripResults(event.mutable_job());
            sink->Send(std::move(event));
            sink->Close(grpc::Status::OK);
          },
          [sink](const absl::Status& refused) {
            sink->Close(grpc::Status(static_cast<grpc::StatusCode>(refused.code()), std::string(refused.message())));
          });
      return;
    }
    // The snapshot as of this batch, sent once it is committed; the job's
    // later events (Watches) follow it.
    v1::JobEvent event;
    event.set_message("snapshot");
    *event.mutable_job() = live->job;
    if (summary) StripResults(event.mutable_job());
    const bool ended = IsTerminal(event.job().state());
    if (!ended) p_.watches->Add(job_id, summary, sink);
    p_.loop->Defer([sink, ended, event = std::move(event)](const absl::Status& commit) {
      if (!commit.ok()) {
        const absl::Status why = NotCommitted(commit);
        sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(why.message())));
        return;
      }
      sink->Send(event);
      if (ended) sink->Close(grpc::Status::OK);
    });
  });
  if (!posted) {
    p_.metrics->AddRequestShed("WatchJob");
    sink->Close(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(Busy(p_.loop->depth()).message())));
  }
}

void JobApi::ListAgents(std::function<void(std::vector<v1::AgentInfo>)> done) {
  auto shared_done = std::make_shared<std::function<void(std::vector<v1::AgentInfo>)>>(std::move(done));
  const bool posted = Post([this, shared_done] {
    p_.loop->Defer([agents = p_.agents->List(), shared_done](const absl::Status&) { (*shared_done)(agents); });
  });
  if (!posted) {
    p_.metrics->AddRequestShed("ListAgents");
    (*shared_done)({});
  }
}

}  // namespace hetbench::server
