#include "server/store/pg_job_store.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "server/store/job_rows.h"
#include "server/store/pg_columns.h"
#include "server/store/pg_schema.h"

namespace hetbench::server {

std::string RedactDbUrl(const std::string& db) {
  std::string out = db;
  // postgresql://user:SECRET@host
  const size_t scheme = out.find("://");
  const size_t at = out.find('@');
  if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
    const size_t colon = out.find(':', scheme + 3);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // ...?password=SECRET&...
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    const size_t end = out.find_first_of("& ", p);
    out.replace(p + 9, (end == std::string::npos ? out.size() : end) - p - 9, "***");
  }
  return out;
}

bool IsPostgresUrl(const std::string& db) {
  return absl::StartsWith(db, "postgresql://") || absl::StartsWith(db, "postgres://");
}


namespace {

using pg::GetBytes;
using pg::GetInt;
using pg::ParseColumn;

struct Statement {
  const char* name;
  const char* sql;
};

// Every statement, prepared on each connection.
constexpr Statement kStatements[] = {
    {"insert_job",
     "INSERT INTO jobs (number, id, created_unix_seconds, finished_unix_seconds, state, request_id, models, kinds, "
     "epoch, header) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"},
    {"put_header", "UPDATE jobs SET state = $1, finished_unix_seconds = $2, header = $3, epoch = $4 WHERE number = $5"},
    {"put_task",
     "INSERT INTO tasks (job_number, idx, state, epoch, task) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_number, "
     "idx) "
     "DO UPDATE SET state = EXCLUDED.state, epoch = EXCLUDED.epoch, task = EXCLUDED.task"},
    {"get_header", "SELECT header FROM jobs WHERE number = $1"},
    {"get_tasks", "SELECT task FROM tasks WHERE job_number = $1 ORDER BY idx"},
    {"get_task", "SELECT task FROM tasks WHERE job_number = $1 AND idx = $2"},
    {"find_request", "SELECT id FROM jobs WHERE request_id = $1"},
    {"live_jobs", "SELECT number, header FROM jobs WHERE state IN (1, 2) ORDER BY number"},
    {"list_jobs",
     "SELECT number, header FROM jobs WHERE number < $1 AND ($2::integer = 0 OR state = $2::integer) AND "
     "($3::text = '' OR strpos(models, ',' || $3::text || ',') > 0) AND ($4::text = '' OR "
     "strpos(kinds, ',' || $4::text || ',') > 0) ORDER BY number DESC LIMIT $5"},  // literal, never a pattern
    {"count_jobs", "SELECT state, COUNT(*) FROM jobs GROUP BY state"},
    {"count_tasks", "SELECT state, COUNT(*) FROM tasks GROUP BY state"},
    {"max_number", "SELECT COALESCE(MAX(number), 0)::bigint FROM jobs"},
    {"put_health",
     "INSERT INTO device_health (agent_id, device_id, epoch, health) VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id, "
     "device_id) DO UPDATE SET epoch = EXCLUDED.epoch, health = EXCLUDED.health"},
    {"clear_health",
     "DELETE FROM device_health WHERE agent_id = $1 AND device_id = $2 AND EXISTS (SELECT 1 FROM "
     "hetbench_fence($3::bigint))"},
    {"load_health", "SELECT agent_id, health FROM device_health ORDER BY agent_id, device_id"},
    {"put_baseline",
     "INSERT INTO baselines (name, version, created_unix_seconds, epoch, baseline) VALUES ($1, $2, $3, $4, $5)"},
    {"latest_baseline", "SELECT COALESCE(MAX(version), 0)::integer FROM baselines WHERE name = $1"},
    {"get_baseline",
     "SELECT baseline FROM baselines WHERE name = $1 AND ($2::integer = 0 OR version = $2::integer) ORDER BY version "
     "DESC LIMIT 1"},
    {"list_baselines",
     "SELECT baseline FROM baselines WHERE ($1::text = '' OR name = $1::text) ORDER BY created_unix_seconds DESC, "
     "name, version DESC LIMIT $2"},
    {"put_batch",
     "INSERT INTO sample_batches (task_id, attempt, seq, phase, sample_count, epoch, batch) VALUES ($1, $2, $3, $4, "
     "$5, $6, $7) ON CONFLICT DO NOTHING"},
    // Many batches in one statement: parallel arrays, one element per batch.
    // RETURNING names the rows stored (a key already there, or twice in the
    // arrays, is stored once).
    {"put_batches",
     "INSERT INTO sample_batches (task_id, attempt, seq, phase, sample_count, epoch, batch) SELECT u.task_id, "
     "u.attempt, u.seq, u.phase, u.sample_count, $6::bigint, u.batch FROM unnest($1::text[], $2::integer[], "
     "$3::bigint[], $4::integer[], $5::integer[], $7::bytea[]) AS u(task_id, attempt, seq, phase, sample_count, batch) "
     "ON CONFLICT DO NOTHING RETURNING task_id, attempt, seq"},
    // A batch's bytes from its row, or from the pieces of its group that
    // hold them (8000: pg::kSamplePieceBytes); with the length its row says
    // they have (NULL for bytes in the row), which a missing piece breaks.
    {"load_batches",
     "SELECT b.seq, b.phase, COALESCE(b.batch, (SELECT substring(string_agg(p.bytes, ''::bytea ORDER BY p.idx) FROM "
     "b.grp_offset % 8000 + 1 FOR b.grp_bytes) FROM sample_pieces p WHERE p.grp = b.grp AND p.idx BETWEEN "
     "b.grp_offset / 8000 AND (b.grp_offset + b.grp_bytes - 1) / 8000)), b.grp_bytes FROM sample_batches b WHERE "
     "b.task_id = $1 AND b.attempt = $2 AND b.seq >= $3 ORDER BY b.seq LIMIT $4"},
    // The first of the group ids this writer may use, and how many it took.
    {"take_groups",
     "SELECT nextval(seqrelid), seqincrement FROM pg_sequence WHERE seqrelid = 'sample_group_ids'::regclass"},
    {"put_power",
     "INSERT INTO power_batches (task_id, attempt, seq, sensor, reading_count, epoch, batch) VALUES ($1, $2, $3, $4, "
     "$5, $6, $7) ON CONFLICT DO NOTHING"},
    {"load_power",
     "SELECT batch FROM power_batches WHERE task_id = $1 AND attempt = $2 AND seq >= $3 ORDER BY seq LIMIT $4"},
    {"to_prune",
     "SELECT number, id FROM jobs WHERE NOT raw_pruned AND state >= 3 AND finished_unix_seconds < $1 "
     "ORDER BY finished_unix_seconds LIMIT $2"},
    // The batches, and of their groups those left with none: the others'
    // live counts lowered (one statement, so each group row is written once).
    {"prune_samples",
     "WITH d AS (DELETE FROM sample_batches WHERE task_id >= $1 AND task_id < $2 RETURNING grp), "
     "c AS (SELECT g.grp, g.live - count(*) AS left_live FROM d JOIN sample_groups g ON g.grp = d.grp "
     "GROUP BY g.grp, g.live), "
     "u AS (UPDATE sample_groups g SET live = c.left_live, epoch = $3 FROM c WHERE g.grp = c.grp AND c.left_live > 0), "
     "p AS (DELETE FROM sample_pieces x USING c WHERE x.grp = c.grp AND c.left_live <= 0) "
     "DELETE FROM sample_groups g USING c WHERE g.grp = c.grp AND c.left_live <= 0"},
    {"prune_power", "DELETE FROM power_batches WHERE task_id >= $1 AND task_id < $2"},
    {"mark_pruned", "UPDATE jobs SET raw_pruned = true, epoch = $2 WHERE number = $1"},
};

}  // namespace

absl::Status CreatePgSchema(PGconn* conn) {
  // The DDL (CREATE OR REPLACE TRIGGER) locks the tables against writes: a
  // connection opened while the leader writes must not queue behind its
  // transactions, and hold up the ones after. So it runs only on a database
  // that does not have this schema version yet (an older one is upgraded:
  // every statement of the schema is idempotent).
  // Two queries: one naming hetbench_meta on a fresh database would fail
  // (and fill the server's log with an error for every new database).
  auto one_row = [conn](const std::string& sql) {
    PGresult* res = PQexec(conn, sql.c_str());
    const bool found = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
    PQclear(res);
    return found;
  };
  const bool current =
      one_row("SELECT 1 FROM pg_class WHERE relname = 'hetbench_meta' AND relkind = 'r' AND pg_table_is_visible(oid)") &&
      one_row(absl::StrCat("SELECT 1 FROM hetbench_meta WHERE key = 'schema_version' AND value = '",
                           pg::kSchemaVersion, "'"));
  if (current) return absl::OkStatus();
  const std::string sql =
      absl::StrCat("BEGIN; SET LOCAL client_min_messages = warning; SELECT pg_advisory_xact_lock(", pg::kSchemaLockKey,
                   ");", pg::kSchema, "INSERT INTO hetbench_meta VALUES ('schema_version', '", pg::kSchemaVersion,
                   "') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE "
                   "hetbench_meta.value::integer < EXCLUDED.value::integer; COMMIT;");
  PGresult* res = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  std::string msg = ok ? "" : PQresultErrorMessage(res);
  PQclear(res);
  if (!ok) {
    PQclear(PQexec(conn, "ROLLBACK"));
    return absl::UnavailableError(absl::StrCat("job store: creating the PostgreSQL schema: ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PgJobStore>> PgJobStore::Open(const PgStoreOptions& options) {
  std::unique_ptr<PgJobStore> store(new PgJobStore(options));
  if (auto s = store->ConnectAndPrepare(); !s.ok()) return s;
  return store;
}

absl::StatusOr<std::unique_ptr<JobStore>> PgJobStore::Connect() {
  auto store = Open(options_);
  if (!store.ok()) return store.status();
  return std::unique_ptr<JobStore>(std::move(*store));
}

PgJobStore::~PgJobStore() { PQfinish(conn_); }

absl::Status PgJobStore::ConnectAndPrepare() {
  PQfinish(conn_);
  conn_ = PQconnectdb(options_.url.c_str());
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn_);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return absl::UnavailableError(absl::StrCat("job store: cannot connect to PostgreSQL at '",
                                               RedactDbUrl(options_.url), "': ", msg,
                                               "; check --db (postgresql://USER@HOST:PORT/DB)"));
  }
  if (auto s = CreatePgSchema(conn_); !s.ok()) return s;
  // A stopped process's open transaction must not hold the leader row's
  // share lock (and so a new leader) for longer than this.
  const int idle_ms = static_cast<int>(std::max(0.1, options_.idle_transaction_seconds) * 1000);
  if (auto s = RunCommand(absl::StrCat("SET idle_in_transaction_session_timeout = ", idle_ms).c_str()); !s.ok()) {
    return s;
  }
  for (const Statement& st : kStatements) {
    PGresult* res = PQprepare(conn_, st.name, st.sql, 0, nullptr);
    const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    absl::Status s = ok ? absl::OkStatus() : ErrorOf(res, absl::StrCat("prepare ", st.name));
    PQclear(res);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PgJobStore::ErrorOf(const PGresult* res, const std::string& what) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn_);
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  if (msg.empty()) msg = PQerrorMessage(conn_);
  const std::string text = absl::StrCat("job store: ", what, ": ", msg);
  const std::string code = state ? state : "";
  if (code == "HB001") {
    absl::Status fenced = absl::FailedPreconditionError(text + " (a newer leader took over)");
    if (options_.on_fenced) options_.on_fenced(fenced);
    return fenced;
  }
  if (code == "53100") return absl::ResourceExhaustedError(text + "; free disk space on the database server");
  if (code == "23505") return absl::AlreadyExistsError(text);
  if (code.rfind("XX", 0) == 0) return absl::DataLossError(text);
  return absl::UnavailableError(text);
}

absl::Status PgJobStore::RunCommand(const char* sql) {
  PGresult* res = PQexec(conn_, sql);
  const ExecStatusType st = PQresultStatus(res);
  absl::Status s = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? absl::OkStatus() : ErrorOf(res, sql);
  PQclear(res);
  return s;
}

absl::StatusOr<PgJobStore::Result> PgJobStore::Run(const char* name, const Params& params, ExecStatusType want) {
  if (!writing_ && PQstatus(conn_) == CONNECTION_BAD) {
    // Between transactions a lost connection is reopened (a database restart).
    if (auto s = ConnectAndPrepare(); !s.ok()) return s;
  }
  if (writing_ && !txn_error_.ok()) return txn_error_;
  const Params::Arrays a = params.ForLibpq();
  Result res(PQexecPrepared(conn_, name, a.n(), a.values.data(), a.lengths.data(), a.formats.data(), /*resultFormat=*/1),
             PQclear);
  if (PQresultStatus(res.get()) != want) {
    absl::Status s = ErrorOf(res.get(), name);
    if (writing_ && txn_error_.ok()) txn_error_ = s;
    return s;
  }
  return res;
}

// As with SQLite, the write transaction starts at the first write: reads
// before it are single autocommit statements. It begins with the fence.
absl::Status PgJobStore::Begin() {
  if (in_batch_) return absl::FailedPreconditionError("job store: Begin inside a transaction");
  in_batch_ = true;
  return absl::OkStatus();
}

absl::Status PgJobStore::EnsureWriting() {
  if (!in_batch_ || writing_) return writing_ ? txn_error_ : absl::OkStatus();
  if (PQstatus(conn_) == CONNECTION_BAD) {
    if (auto s = ConnectAndPrepare(); !s.ok()) return s;
  }
  writing_ = true;
  txn_error_ = RunCommand(absl::StrCat("BEGIN; SELECT hetbench_fence(", options_.epoch, ")").c_str());
  return txn_error_;
}

absl::Status PgJobStore::Commit() {
  const bool writing = writing_;
  in_batch_ = writing_ = false;
  if (!writing) return absl::OkStatus();
  absl::Status failed = std::move(txn_error_);
  txn_error_ = absl::OkStatus();
  PGresult* res = PQexec(conn_, "COMMIT");
  // COMMIT of a transaction with a failed statement answers ROLLBACK.
  const bool committed = PQresultStatus(res) == PGRES_COMMAND_OK && std::strcmp(PQcmdStatus(res), "COMMIT") == 0;
  absl::Status s = committed ? absl::OkStatus() : (!failed.ok() ? failed : ErrorOf(res, "commit"));
  PQclear(res);
  return s;
}

absl::Status PgJobStore::Rollback() {
  const bool writing = writing_;
  in_batch_ = writing_ = false;
  txn_error_ = absl::OkStatus();
  if (!writing || PQstatus(conn_) == CONNECTION_BAD) return absl::OkStatus();
  return RunCommand("ROLLBACK");
}

absl::Status PgJobStore::InsertJob(const v1::Job& job, const std::string& request_id) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  const int64_t number = JobNumber(job.id());
  if (number == 0) return absl::InvalidArgumentError(absl::StrCat("job store: job id '", job.id(), "' is malformed"));
  Params p;
  p.Int(number).Text(job.id()).Real(job.created_unix_seconds()).Real(job.finished_unix_seconds()).Int(job.state());
  if (request_id.empty()) {
    p.Null();
  } else {
    p.Text(request_id);
  }
  p.Text(ModelsKey(job.spec())).Text(KindsKey(job.spec())).Int(options_.epoch).Bytes(HeaderBlob(job));
  if (auto r = Run("insert_job", p, PGRES_COMMAND_OK); !r.ok()) return r.status();
  for (const v1::Task& task : job.tasks()) {
    if (auto s = PutTask(task); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PgJobStore::PutJobHeader(const v1::Job& job) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  Params p;
  p.Int(job.state())
      .Real(job.finished_unix_seconds())
      .Bytes(HeaderBlob(job))
      .Int(options_.epoch)
      .Int(JobNumber(job.id()));
  return Run("put_header", p, PGRES_COMMAND_OK).status();
}

absl::Status PgJobStore::PutTask(const v1::Task& task) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  Params p;
  p.Int(JobNumber(task.job_id()))
      .Int(task.index())
      .Int(task.state())
      .Int(options_.epoch)
      .Bytes(task.SerializeAsString());
  return Run("put_task", p, PGRES_COMMAND_OK).status();
}

absl::Status PgJobStore::LoadTasks(int64_t number, bool with_results, v1::Job* job) {
  auto res = Run("get_tasks", Params().Int(number), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    v1::Task* task = job->add_tasks();
    if (!ParseColumn(res->get(), r, 0, task)) {
      return absl::DataLossError(absl::StrCat("job store: a task of '", job->id(), "' does not parse"));
    }
    if (!with_results) task->clear_result();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Job>> PgJobStore::LoadLiveJobs() {
  auto res = Run("live_jobs", Params(), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  std::vector<v1::Job> jobs;
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    v1::Job job;
    const int64_t number = GetInt(res->get(), r, 0);
    if (!ParseColumn(res->get(), r, 1, &job)) {
      return absl::DataLossError(absl::StrCat("job store: job number ", number, " does not parse"));
    }
    if (auto s = LoadTasks(number, /*with_results=*/true, &job); !s.ok()) return s;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

absl::StatusOr<std::optional<v1::Job>> PgJobStore::GetJob(const std::string& job_id) {
  const int64_t number = JobNumber(job_id);
  if (number == 0) return std::optional<v1::Job>();
  auto res = Run("get_header", Params().Int(number), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  if (PQntuples(res->get()) == 0) return std::optional<v1::Job>();
  v1::Job job;
  if (!ParseColumn(res->get(), 0, 0, &job)) {
    return absl::DataLossError(absl::StrCat("job store: job '", job_id, "' does not parse"));
  }
  if (job.id() != job_id) return std::optional<v1::Job>();  // "job-42" vs "job-000042"
  if (auto s = LoadTasks(number, /*with_results=*/true, &job); !s.ok()) return s;
  return std::optional<v1::Job>(std::move(job));
}

absl::StatusOr<std::optional<v1::Task>> PgJobStore::GetTask(const std::string& task_id) {
  auto key = SplitTaskId(task_id);
  if (!key) return std::optional<v1::Task>();
  auto res = Run("get_task", Params().Int(JobNumber(key->first)).Int(key->second), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  if (PQntuples(res->get()) == 0) return std::optional<v1::Task>();
  v1::Task task;
  if (!ParseColumn(res->get(), 0, 0, &task)) {
    return absl::DataLossError(absl::StrCat("job store: task '", task_id, "' does not parse"));
  }
  if (task.id() != task_id) return std::optional<v1::Task>();
  return std::optional<v1::Task>(std::move(task));
}

absl::StatusOr<std::string> PgJobStore::FindRequest(const std::string& request_id) {
  auto res = Run("find_request", Params().Text(request_id), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  if (PQntuples(res->get()) == 0) return std::string();
  return std::string(GetBytes(res->get(), 0, 0));
}

absl::StatusOr<JobPage> PgJobStore::ListJobs(const JobFilter& filter) {
  int64_t before = INT64_MAX;
  if (!filter.page_token.empty() && (!absl::SimpleAtoi(filter.page_token, &before) || before <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token ", QuotedInput(filter.page_token), ": not a token this coordinator gave; start without one"));
  }
  const int page_size = std::max(1, filter.page_size);
  Params p;
  p.Int(before).Int(filter.state).Text(filter.model);
  p.Text(filter.device_kind == v1::DEVICE_KIND_UNSPECIFIED ? std::string() : DeviceKindName(filter.device_kind));
  p.Int(page_size + 1);  // one more tells whether a next page exists
  auto res = Run("list_jobs", p, PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  JobPage page;
  int64_t last_number = 0;
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    if (static_cast<int>(page.jobs.size()) == page_size) {
      page.next_page_token = absl::StrCat(last_number);
      break;
    }
    last_number = GetInt(res->get(), r, 0);
    v1::Job job;
    if (!ParseColumn(res->get(), r, 1, &job)) {
      return absl::DataLossError(absl::StrCat("job store: job number ", last_number, " does not parse"));
    }
    if (auto s = LoadTasks(last_number, /*with_results=*/false, &job); !s.ok()) return s;
    page.jobs.push_back(std::move(job));
  }
  return page;
}

absl::StatusOr<StateCounts> PgJobStore::CountByState() {
  StateCounts counts;
  auto jobs = Run("count_jobs", Params(), PGRES_TUPLES_OK);
  if (!jobs.ok()) return jobs.status();
  for (int r = 0; r < PQntuples(jobs->get()); ++r) {
    counts.jobs[static_cast<v1::JobState>(GetInt(jobs->get(), r, 0))] = GetInt(jobs->get(), r, 1);
  }
  auto tasks = Run("count_tasks", Params(), PGRES_TUPLES_OK);
  if (!tasks.ok()) return tasks.status();
  for (int r = 0; r < PQntuples(tasks->get()); ++r) {
    counts.tasks[static_cast<v1::TaskState>(GetInt(tasks->get(), r, 0))] = GetInt(tasks->get(), r, 1);
  }
  return counts;
}

absl::StatusOr<int64_t> PgJobStore::MaxJobNumber() {
  auto res = Run("max_number", Params(), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  return GetInt(res->get(), 0, 0);
}

absl::StatusOr<int> PgJobStore::PruneRawBatches(double finished_before_unix, int max_jobs) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  auto jobs = Run("to_prune", Params().Real(finished_before_unix).Int(max_jobs), PGRES_TUPLES_OK);
  if (!jobs.ok()) return jobs.status();
  const int n = PQntuples(jobs->get());
  for (int r = 0; r < n; ++r) {
    const int64_t number = GetInt(jobs->get(), r, 0);
    const std::string id(GetBytes(jobs->get(), r, 1));
    // Task ids of a job share the prefix "<job>-t": a range over the key (COLLATE "C").
    if (auto d = Run("prune_samples", Params().Text(id + "-t").Text(id + "-u").Int(options_.epoch), PGRES_COMMAND_OK);
        !d.ok()) {
      return d.status();
    }
    if (auto d = Run("prune_power", Params().Text(id + "-t").Text(id + "-u"), PGRES_COMMAND_OK); !d.ok()) {
      return d.status();
    }
    if (auto m = Run("mark_pruned", Params().Int(number).Int(options_.epoch), PGRES_COMMAND_OK); !m.ok()) {
      return m.status();
    }
  }
  return n;
}

}  // namespace hetbench::server
