#include "server/http/web_ui.h"

#include <httplib.h>

#include <chrono>
#include <future>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/names.h"
#include "report/compare.h"
#include "report/history.h"
#include "report/render/common.h"
#include "report/render/html.h"
#include "report/render/plots.h"
#include "report/render/web.h"

namespace hetbench::server {

namespace {

constexpr const char* kLog = "web";
constexpr auto kWait = std::chrono::seconds(20);

// Runs one of the coordinator's asynchronous calls and waits for its answer.
template <typename T>
absl::StatusOr<T> Await(const std::function<void(std::function<void(absl::StatusOr<T>)>)>& start) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
  std::future<absl::StatusOr<T>> answer = promise->get_future();
  start([promise](absl::StatusOr<T> v) { promise->set_value(std::move(v)); });
  if (answer.wait_for(kWait) != std::future_status::ready) {
    return absl::DeadlineExceededError("the coordinator did not answer in 20 s; reload the page");
  }
  return answer.get();
}

int HttpStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kResourceExhausted: return 503;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

void Html(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body, "text/html; charset=utf-8");
}

void Error(httplib::Response& res, const absl::Status& s) {
  const int code = HttpStatus(s);
  Html(res, code, report::RenderErrorPage(code, std::string(s.message())));
}

std::string Param(const httplib::Request& req, const char* name) {
  return req.has_param(name) ? req.get_param_value(name) : "";
}

}  // namespace

WebUi::WebUi(Coordinator* coordinator, const Authorizer* auth, WebUiOptions options)
    : coordinator_(coordinator), auth_(auth), options_(std::move(options)) {}

WebUi::~WebUi() { Stop(); }

absl::Status WebUi::Start() {
  const std::string& address = options_.address;
  const auto colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", address, ": expected HOST:PORT, e.g. 127.0.0.1:8080 (port 0 = any)"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const bool loopback = host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
  if (auth_->tokens_configured() && !tls() && !loopback && !options_.plaintext_tokens) {
    return absl::FailedPreconditionError(
        absl::StrCat("--http-listen ", address, ": bearer tokens are on and the web UI would be plain HTTP on a "
                     "non-loopback address, so a token would cross the network in the clear; give --tls-cert and "
                     "--tls-key (HTTPS), listen on 127.0.0.1 behind an SSH tunnel or proxy, or accept it with "
                     "--http-plaintext-tokens"));
  }
  if (tls()) {
    auto https = std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("web UI: cannot use the certificate ", options_.tls_cert,
                                                     " with the key ", options_.tls_key,
                                                     " for HTTPS; check --tls-cert and --tls-key"));
    }
    http_ = std::move(https);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  // A pool larger than the default 8, and a read timeout, so a few clients
  // trickling their headers cannot hold every thread.
  const int threads = std::max(options_.threads, 2);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_read_timeout(5, 0);
  http_->set_keep_alive_timeout(5);
  port_ = port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) {
    http_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve the web UI on ", address, ": address in use or invalid; choose another with "
                                                             "--http-listen"));
  }
  WebAccessOptions access{host, port_, options_.allowed_hosts, tls()};
  access_ = std::make_unique<WebAccess>(std::move(access), auth_);
  Routes();
  LoginRoutes();
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  LogInfo(kLog, "web UI on ", tls() ? "https" : "http", "://", host, ":", port_, "/",
          auth_->tokens_configured() ? " (a client token or a login is required)" : "",
          options_.allowed_hosts.empty() ? "" : absl::StrCat("; names: ", absl::StrJoin(options_.allowed_hosts, ", ")));
  if (auth_->tokens_configured() && !tls()) {
    LogWarning(kLog, "the web UI is plain HTTP while bearer tokens are on: a token or session cookie sent to it "
                     "crosses the network in the clear unless it is reached over loopback; give --tls-cert/--tls-key");
  }
  return absl::OkStatus();
}

void WebUi::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<v1::TaskData> WebUi::AllPages(const v1::Task& t, v1::GetTaskDataRequest::Kind kind) {
  v1::GetTaskDataRequest r;
  r.set_task_id(t.id());
  r.set_kind(kind);
  r.set_page_size(StoreReader::kMaxPageSize);
  v1::TaskData all;
  do {
    auto data = Await<v1::TaskData>([&](auto done) { coordinator_->api().GetTaskData(r, std::move(done)); });
    if (!data.ok()) return data.status();
    all.mutable_samples()->MergeFrom(data->samples());
    all.mutable_power()->MergeFrom(data->power());
    r.set_page_token(data->next_page_token());
  } while (!r.page_token().empty());
  return all;
}

absl::Status WebUi::ListedJobs(const JobFilter& filter, std::vector<v1::Job>* out) {
  auto page = Await<JobPage>([&](auto done) { coordinator_->api().ListJobs(filter, std::move(done)); });
  if (!page.ok()) return page.status();
  for (const v1::Job& listed : page->jobs) {
    auto job = Await<v1::Job>([&](auto done) { coordinator_->api().GetJob(listed.id(), std::move(done)); });
    if (job.ok()) out->push_back(std::move(*job));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Job>> WebUi::OtherJobs(const v1::Job& a) {
  std::vector<v1::Job> out;
  if (a.spec().repeats() < 2) return out;  // one run a side: no run-to-run spread to moderate
  std::set<std::string> models;
  for (const v1::Task& t : a.tasks()) models.insert(report::render::TaskModel(a, t));
  for (const std::string& model : models) {
    JobFilter filter;
    filter.page_size = 100;
    filter.model = model;
    filter.state = v1::JOB_STATE_SUCCEEDED;
    if (absl::Status s = ListedJobs(filter, &out); !s.ok()) return s;
  }
  return out;
}

void WebUi::Routes() {
  // Every request: one of this UI's names, then a client token or session
  // when tokens are configured (the login form itself is open).
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!access_->HostAllowed(req.get_header_value("Host"))) {
      Html(res, 421,
           report::RenderErrorPage(421, absl::StrCat("Host ", QuotedInput(req.get_header_value("Host")),
                                                     " is not a name of this web UI (a guard against DNS "
                                                     "rebinding); start the coordinator with --http-allowed-host "
                                                     "NAME to serve it under that name")));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/login") return httplib::Server::HandlerResponse::Unhandled;
    const grpc::Status s =
        access_->Check(req.get_header_value("Authorization"), req.get_header_value("Cookie"), absl::Now());
    if (s.ok()) return httplib::Server::HandlerResponse::Unhandled;
    const int code = s.error_code() == grpc::StatusCode::PERMISSION_DENIED ? 403 : 401;
    if (code == 401) res.set_header("WWW-Authenticate", "Bearer");
    Html(res, code, report::RenderErrorPage(code, s.error_message()));
    return httplib::Server::HandlerResponse::Handled;
  });

  http_->Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/jobs"); });

  http_->Get("/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    report::JobsFilter f{Param(req, "state"), Param(req, "model"), Param(req, "kind"), Param(req, "page_token")};
    JobFilter filter;
    filter.page_size = 50;
    filter.page_token = f.page_token;
    filter.model = f.model;
    if (!f.state.empty()) {
      auto state = ParseJobState(f.state);
      if (!state) return Error(res, absl::InvalidArgumentError("state = " + f.state + ": use queued, running, "
                                                                                    "succeeded, failed or cancelled"));
      filter.state = *state;
    }
    if (!f.kind.empty()) {
      auto kind = ParseDeviceKind(f.kind);
      if (!kind) return Error(res, absl::InvalidArgumentError("kind = " + f.kind + ": use cpu, gpu, tpu, dpu or qpu-sim"));
      filter.device_kind = *kind;
    }
    auto page = Await<JobPage>([&](auto done) { coordinator_->api().ListJobs(filter, std::move(done)); });
    if (!page.ok()) return Error(res, page.status());
    Html(res, 200, report::RenderJobsPage(page->jobs, f, page->next_page_token));
  });

  http_->Get(R"(/jobs/([A-Za-z0-9_-]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    auto job = Await<v1::Job>([&](auto done) { coordinator_->api().GetJob(id, std::move(done)); });
    if (!job.ok()) return Error(res, job.status());
    report::PowerTraces power;
    for (const v1::Task* t : report::TimelineTasks(*job)) {
      if (t->result().power_readings_stored() == 0) continue;
      auto data = AllPages(*t, v1::GetTaskDataRequest::KIND_POWER);
      if (data.ok()) power[t->id()].assign(data->power().begin(), data->power().end());  // else: "none fetched"
    }
    // Step traces once the job has ended: a running job's page reloads every
    // 3 s and would fetch every traced task's samples again each time.
    report::StepTraces steps;
    for (const v1::Task* t : IsTerminal(job->state()) ? report::StepTraceTasks(*job) : std::vector<const v1::Task*>{}) {
      auto data = AllPages(*t, v1::GetTaskDataRequest::KIND_SAMPLES);
      if (data.ok()) steps[t->id()].assign(data->samples().begin(), data->samples().end());  // else: not drawn
    }
    report::WebPage web;
    web.nav = true;
    web.refresh_seconds = IsTerminal(job->state()) ? 0 : 3;
    Html(res, 200,
         report::RenderHtmlReport(*job, report::JobPlots(*job, power, steps), v1::DEVICE_KIND_CPU, false, web));
  });

  http_->Get("/agents", [this](const httplib::Request&, httplib::Response& res) {
    auto agents = Await<std::vector<v1::AgentInfo>>([&](auto done) {
      coordinator_->api().ListAgents([done = std::move(done)](std::vector<v1::AgentInfo> a) { done(std::move(a)); });
    });
    if (!agents.ok()) return Error(res, agents.status());
    Html(res, 200, report::RenderAgentsPage(*agents));
  });

  // Every page of a task's training and inference samples.
  auto samples_of = [this](const v1::Task& t) -> absl::StatusOr<std::vector<v1::SampleBatch>> {
    auto data = AllPages(t, v1::GetTaskDataRequest::KIND_SAMPLES);
    if (!data.ok()) return data.status();
    return std::vector<v1::SampleBatch>(data->samples().begin(), data->samples().end());
  };

  http_->Get("/compare", [this, samples_of](const httplib::Request& req, httplib::Response& res) {
    auto threshold = report::ParseThreshold(Param(req, "threshold"));
    if (!threshold.ok()) {
      return Error(res, absl::InvalidArgumentError(absl::StrCat("threshold = ", threshold.status().message())));
    }
    const std::string a_id = Param(req, "a"), b_id = Param(req, "b");
    if (a_id.empty() || b_id.empty()) return Html(res, 200, report::RenderComparePage(nullptr, nullptr, {}, {}, *threshold));
    auto a = Await<v1::Job>([&](auto done) { coordinator_->api().GetJob(a_id, std::move(done)); });
    if (!a.ok()) return Error(res, a.status());
    auto b = Await<v1::Job>([&](auto done) { coordinator_->api().GetJob(b_id, std::move(done)); });
    if (!b.ok()) return Error(res, b.status());
    auto others = OtherJobs(*a);
    if (!others.ok()) return Error(res, others.status());
    std::vector<const v1::Job*> other_jobs;
    for (const v1::Job& job : *others) other_jobs.push_back(&job);
    std::vector<std::string> unpaired;
    std::vector<report::PairResult> results;
    for (const report::RunPair& pair : report::PairRuns({&*a}, {&*b}, false, &unpaired)) {
      if (!pair.refused.empty()) {
        results.push_back({pair, v1::PHASE_UNSPECIFIED, {}});
        continue;
      }
      // Every run's samples (a job with repeats has several a side), fetched once.
      std::vector<std::vector<v1::SampleBatch>> sa, sb;
      for (auto [tasks, out] : {std::pair{&pair.a, &sa}, std::pair{&pair.b, &sb}}) {
        for (const v1::Task* t : *tasks) {
          auto s = samples_of(*t);
          if (!s.ok()) return Error(res, s.status());
          out->push_back(std::move(*s));
        }
      }
      for (v1::Phase phase : report::kComparedPhases) {
        std::vector<std::vector<double>> x, y;
        bool any = false;
        for (auto [batches, out] : {std::pair{&sa, &x}, std::pair{&sb, &y}}) {
          for (const auto& run : *batches) {
            out->push_back(report::TimesPerSample(run, phase));
            any = any || !out->back().empty();
          }
        }
        if (!any) continue;
        results.push_back({pair, phase, report::CompareRunPhase(pair, phase, x, y, *threshold, false, other_jobs)});
      }
    }
    Html(res, 200, report::RenderComparePage(&*a, &*b, results, unpaired, *threshold));
  });

  http_->Get("/history", [this, samples_of](const httplib::Request& req, httplib::Response& res) {
    const std::string model = Param(req, "model"), kind_text = Param(req, "kind");
    if (model.empty()) return Html(res, 200, report::RenderHistoryPage({}, "", kind_text, 0.02));
    JobFilter filter;
    filter.page_size = 100;  // the newest 100 jobs of the model
    filter.model = model;
    if (!kind_text.empty()) {
      auto kind = ParseDeviceKind(kind_text);
      if (!kind) return Error(res, absl::InvalidArgumentError("kind = " + kind_text + ": use cpu, gpu, tpu, dpu or qpu-sim"));
      filter.device_kind = *kind;
    }
    std::vector<v1::Job> jobs;
    if (absl::Status s = ListedJobs(filter, &jobs); !s.ok()) return Error(res, s);
    auto steps_of = [&](const v1::Task& t) {
      auto s = samples_of(t);
      return s.ok() ? report::TimesPerSample(*s, v1::PHASE_TRAIN) : std::vector<double>{};
    };
    const auto rows = report::BuildHistory(jobs, model, filter.device_kind, 0.02, steps_of);
    Html(res, 200, report::RenderHistoryPage(rows, model, kind_text, 0.02));
  });

  http_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      Html(res, res.status, report::RenderErrorPage(res.status, res.status == 404 ? "no such page" : "error"));
    }
  });
}

void WebUi::LoginRoutes() {
  const bool plain = !tls();
  http_->Get("/login", [this, plain](const httplib::Request&, httplib::Response& res) {
    Html(res, 200, report::RenderLoginPage(access_->tokens_configured(), plain, ""));
  });
  http_->Post("/login", [this, plain](const httplib::Request& req, httplib::Response& res) {
    if (!access_->OriginAllowed(req.get_header_value("Origin"))) {
      return Html(res, 403, report::RenderErrorPage(403, "a login posted from another site"));
    }
    auto id = access_->Login(Param(req, "token"), absl::Now());
    if (!id.ok()) {
      absl::SleepFor(absl::Milliseconds(200));  // guessing tokens stays slow
      const int code = id.status().code() == absl::StatusCode::kPermissionDenied ? 403 : 401;
      return Html(res, code, report::RenderLoginPage(true, plain, std::string(id.status().message())));
    }
    res.set_header("Set-Cookie", access_->SessionCookie(*id));
    res.set_redirect("/jobs", 303);
  });
  http_->Post("/logout", [this](const httplib::Request& req, httplib::Response& res) {
    if (!access_->OriginAllowed(req.get_header_value("Origin"))) {
      return Html(res, 403, report::RenderErrorPage(403, "a logout posted from another site"));
    }
    access_->Logout(req.get_header_value("Cookie"));
    res.set_header("Set-Cookie", access_->ClearedCookie());
    res.set_redirect("/login", 303);
  });
}

}  // namespace hetbench::server
