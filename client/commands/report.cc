// hetbench report ID: the comparison table (or csv/json), --study, --layers, --serving,
// and the figures: --html FILE (one self-contained page), --svg DIR.
#include <filesystem>
#include <fstream>

#include "client/commands/command.h"
#include "report/render/html.h"
#include "report/render/plots.h"
#include "report/render/serving.h"
#include "common/names.h"

namespace hetbench::client {

namespace {

class Report final : public Command {
 public:
  CLI::App* Add(CLI::App& app, Common& common) override {
    CLI::App* sub = app.add_subcommand("report", "compare the results of a job");
    sub->add_option("id", job_id_, "job id")->required();
    sub->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
    sub->add_option("--baseline", baseline_, "device kind speedups are relative to")->capture_default_str();
    sub->add_flag("--layers", layers_, "print only the per-layer times (table or csv)");
    sub->add_flag("--serving", serving_, "print only the serving table (table or csv: every figure, ns)");
    sub->add_flag("--compare-anyway", compare_anyway_, "compute speedups even between different model fingerprints");
    sub->add_flag("--study", study_,
                  "print the reference study's time/power/energy table (E = P x T with nominal watts)");
    sub->add_option("--html", html_file_,
                    "write one self-contained HTML report (figures, tables, environment, validity, rerun command)");
    sub->add_option("--svg", svg_dir_, "write every figure as an SVG file into this directory");
    return sub;
  }
  std::string View() const override {
    return study_ ? "report --study" : layers_ ? "report --layers" : serving_ ? "report --serving" : "report";
  }
  std::vector<std::string> Formats() const override {
    if (study_ || layers_ || serving_) return {"table", "csv"};
    return {"table", "json", "csv"};
  }

  int Run(Context& c) override {
    const auto kind = ParseDeviceKind(baseline_);
    if (!kind) {
      c.err << "hetbench: --baseline " << baseline_ << ": unknown device kind; use cpu, gpu, tpu, dpu or qpu-sim\n";
      return kExitUsage;
    }
    v1::Job job;
    if (grpc::Status s = FetchJob(c, job_id_, &job); !s.ok()) return RpcError(c.err, "get job", s, c.common.server);
    if (!html_file_.empty() || !svg_dir_.empty()) {
      if (int rc = WriteFigures(c, job, *kind); rc != kExitOk) return rc;
    } else if (study_) {
      c.out << RenderStudyTable(job, *kind, compare_anyway_, c.format);
    } else if (layers_) {
      c.out << RenderLayers(job, c.format, *kind);
    } else if (serving_) {
      const std::string table = RenderServing(job, c.format);
      if (table.empty()) {
        c.err << "hetbench: report --serving: " << job.id() << " has no serving task (its spec has no serving:)\n";
        return kExitFailed;
      }
      c.out << table;
    } else {
      c.out << RenderReport(job, c.format, compare_anyway_, *kind);
    }
    return IsTerminal(job.state()) ? ExitFor(job) : kExitOk;
  }

 private:
  // The figures (timelines with the power readings each task stored, step
  // times over the run from its samples) and the page.
  int WriteFigures(Context& c, const v1::Job& job, v1::DeviceKind baseline) {
    PowerTraces power;
    for (const v1::Task* t : TimelineTasks(job)) {
      if (t->result().power_readings_stored() == 0) continue;
      v1::TaskData data;
      grpc::Status s = FetchTaskData(c, t->id(), v1::GetTaskDataRequest::KIND_POWER, &data);
      if (!s.ok()) return RpcError(c.err, "power readings of " + t->id(), s, c.common.server);
      power[t->id()].assign(data.power().begin(), data.power().end());
    }
    StepTraces steps;
    for (const v1::Task* t : StepTraceTasks(job)) {
      v1::TaskData data;
      grpc::Status s = FetchTaskData(c, t->id(), v1::GetTaskDataRequest::KIND_SAMPLES, &data);
      if (!s.ok()) return RpcError(c.err, "samples of " + t->id(), s, c.common.server);
      steps[t->id()].assign(data.samples().begin(), data.samples().end());
    }
    const std::vector<Plot> plots = JobPlots(job, power, steps);
    if (!svg_dir_.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(svg_dir_, ec);
      if (ec) {
        c.err << "hetbench: --svg " << svg_dir_ << ": cannot create the directory: " << ec.message() << "\n";
        return kExitFailed;
      }
      for (const Plot& p : plots) {
        const std::string path = (std::filesystem::path(svg_dir_) / (p.name + ".svg")).string();
        std::ofstream f(path);
        f << p.svg;
        if (!f.flush()) {
          c.err << "hetbench: --svg: cannot write " << path << "\n";
          return kExitFailed;
        }
      }
      c.out << "wrote " << plots.size() << " figures to " << svg_dir_ << "\n";
    }
    if (!html_file_.empty()) {
      // Written beside, then renamed: a reader never sees half a report.
      const std::string tmp = html_file_ + ".tmp";
      {
        std::ofstream f(tmp);
        f << RenderHtmlReport(job, plots, baseline, compare_anyway_);
        if (!f.flush()) {
          c.err << "hetbench: --html " << html_file_ << ": cannot write it\n";
          std::filesystem::remove(tmp);
          return kExitFailed;
        }
      }
      std::error_code ec;
      std::filesystem::rename(tmp, html_file_, ec);
      if (ec) {
        c.err << "hetbench: --html " << html_file_ << ": " << ec.message() << "\n";
        return kExitFailed;
      }
      c.out << "wrote " << html_file_ << " (" << plots.size() << " figures)\n";
    }
    return kExitOk;
  }

  std::string job_id_, baseline_ = "cpu", html_file_, svg_dir_;
  bool study_ = false, layers_ = false, serving_ = false, compare_anyway_ = false;
};

}  // namespace

std::unique_ptr<Command> ReportCommand() { return std::make_unique<Report>(); }

}  // namespace hetbench::client
