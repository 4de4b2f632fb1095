#pragma once
/// The pages of the coordinator's read-only web UI (server/http), drawn with
/// the CLI's renderer: the job list (filters, pages), agents and their devices
/// (and the kinds not offered, with why), a comparison of two jobs, one
/// model's history with its plot, and error pages. No script; links only
/// between the UI's own pages. The job page is RenderHtmlReport (html.h).

#include <string>
#include <vector>

#include "report/compare.h"
#include "report/history.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

struct JobsFilter {
  std::string state, model, kind;  // as typed in the form; empty = any
  std::string page_token;          // of this page
};
std::string RenderJobsPage(const std::vector<v1::Job>& jobs, const JobsFilter& filter,
                           const std::string& next_page_token);

std::string RenderAgentsPage(const std::vector<v1::AgentInfo>& agents);

/// `a` and `b` null: the form alone.
std::string RenderComparePage(const v1::Job* a, const v1::Job* b, const std::vector<PairResult>& results,
                              const std::vector<std::string>& unpaired, double threshold);

/// `model` empty: the form alone.
std::string RenderHistoryPage(const std::vector<HistoryRow>& rows, const std::string& model, const std::string& kind,
                              double threshold);

std::string RenderErrorPage(int http_status, const std::string& message);
/// The login form: a client token in, a session cookie out. `tokens_on`
/// false: the UI is open and needs none; `plain_http`: a warning that the
/// token would cross the network in the clear; `error`: why the last try
/// failed (never the token).
std::string RenderLoginPage(bool tokens_on, bool plain_http, const std::string& error);

/// "a=b&c=d" with each value escaped for a URL.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace hetbench::report
