// hetbench history --model M [--device-kind K] [--since DATE]: one model's
// results over time from the store, with change points (report/history.h).
#include "report/history.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/commands/command.h"
#include "common/names.h"

namespace hetbench::client {

namespace {

class History final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand("history", "one model's results over time, with change points");
    sub->add_option("--model", model_, "the model, e.g. mlp")->required();
    sub->add_option("--device-kind", kind_, "only this device kind (cpu, gpu, tpu, dpu, qpu-sim)");
    sub->add_option("--since", since_, "only jobs created on or after this date (YYYY-MM-DD, UTC)");
    sub->add_option("--limit", limit_, "newest N jobs at most")->capture_default_str()->check(CLI::Range(1, 100000));
    sub->add_option("--threshold", threshold_text_, "compare's threshold for a change point, e.g. 2% or 0.02")
        ->capture_default_str();
    sub->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
    return sub;
  }
  std::string View() const override { return "history"; }
  std::vector<std::string> Formats() const override { return {"table", "json", "csv"}; }

  int Run(Context& c) override {
    v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED;
    if (!kind_.empty()) {
      auto parsed = ParseDeviceKind(kind_);
      if (!parsed) {
        c.err << "hetbench: --device-kind " << kind_ << ": use cpu, gpu, tpu, dpu or qpu-sim\n";
        return kExitUsage;
      }
      kind = *parsed;
    }
    double since_unix = 0;
    if (!since_.empty()) {
      absl::Time t;
      std::string error;
      if (!absl::ParseTime("%Y-%m-%d", since_, absl::UTCTimeZone(), &t, &error)) {
        c.err << "hetbench: --since " << since_ << ": expected a date YYYY-MM-DD (" << error << ")\n";
        return kExitUsage;
      }
      since_unix = absl::ToUnixSeconds(t);
    }
    auto threshold = ParseThreshold(threshold_text_);
    if (!threshold.ok()) {
      c.err << "hetbench: --threshold " << threshold.status().message() << "\n";
      return kExitUsage;
    }
    threshold_ = *threshold;
    // Newest first, a page at a time, until --limit or --since.
    v1::ListJobsRequest req;
    req.set_model(model_);
    req.set_device_kind(kind);
    std::vector<std::string> ids;
    bool older = false;
    do {
      req.set_page_size(std::min(500, limit_ - static_cast<int>(ids.size())));
      grpc::ClientContext ctx;
      Prepare(&ctx, c.common.timeout_seconds, c.common.token);
      v1::ListJobsResponse resp;
      grpc::Status s = c.stub.ListJobs(&ctx, req, &resp);
      if (!s.ok()) return RpcError(c.err, "list jobs", s, c.common.server);
      for (const v1::Job& j : resp.jobs()) {
        if (j.created_unix_seconds() < since_unix) {
          older = true;
          break;
        }
        ids.push_back(j.id());
      }
      req.set_page_token(resp.next_page_token());
    } while (!older && !req.page_token().empty() && static_cast<int>(ids.size()) < limit_);
    std::vector<v1::Job> jobs(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (grpc::Status s = FetchJob(c, ids[i], &jobs[i]); !s.ok()) {
        return RpcError(c.err, "get job " + ids[i], s, c.common.server);
      }
    }
    int unreadable = 0;
    auto steps_of = [&](const v1::Task& t) -> std::vector<double> {
      v1::TaskData data;
      if (!FetchTaskData(c, t.id(), v1::GetTaskDataRequest::KIND_SAMPLES, &data).ok()) {
        ++unreadable;
        return {};
      }
      return TimesPerSample({data.samples().begin(), data.samples().end()}, v1::PHASE_TRAIN);
    };
    const std::vector<HistoryRow> rows = BuildHistory(jobs, model_, kind, threshold_, steps_of);
    c.out << RenderHistory(rows, model_, threshold_, c.common.output);
    if (unreadable > 0) {
      c.err << "hetbench: history: the samples of " << unreadable
            << " task(s) could not be read (pruned by retention, or the coordinator is busy): no change point there\n";
    }
    if (rows.empty()) c.err << "hetbench: history: no succeeded " << model_ << " task in " << ids.size() << " jobs\n";
    return kExitOk;
  }

 private:
  std::string model_, kind_, since_, threshold_text_ = "2%";
  int limit_ = 200;
  double threshold_ = 0.02;
};

}  // namespace

std::unique_ptr<Command> HistoryCommand() { return std::make_unique<History>(); }

}  // namespace hetbench::client
