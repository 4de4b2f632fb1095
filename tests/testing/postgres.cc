#include "tests/testing/postgres.h"

#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace hetbench::testing {
namespace {

// Debian installs the server programs under /usr/lib/postgresql/<version>/bin.
std::string FindBinDir() {
  std::string best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = entry.path().string() + "/bin";
    if (std::filesystem::exists(bin + "/initdb") && bin > best) best = bin;
  }
  return best;
}

// Runs a shell command; its output (stdout and stderr) and exit status.
std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(bool durable) {
  std::unique_ptr<PostgresServer> pg(new PostgresServer());
  pg->bin_ = FindBinDir();
  if (pg->bin_.empty()) {
    return absl::FailedPreconditionError(
        "no PostgreSQL server under /usr/lib/postgresql; run scripts/install-deps (package postgresql)");
  }
  pg->as_postgres_ = geteuid() == 0;
  // As root the directory lives in /tmp, where the postgres user can reach it.
  const std::string base = pg->as_postgres_ ? "/tmp" : std::filesystem::temp_directory_path().string();
  std::string tmpl = base + "/hetbench-pg-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  pg->dir_ = tmpl;
  if (pg->as_postgres_) {
    const passwd* pw = getpwnam("postgres");
    if (pw == nullptr) return absl::FailedPreconditionError("no 'postgres' user; install the postgresql package");
    if (chown(pg->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) return absl::InternalError("chown failed");
  }
  const std::string as = pg->as_postgres_ ? "runuser -u postgres -- " : "";
  auto [rc, out] = Shell(absl::StrCat(as, pg->bin_, "/initdb -D ", Quote(pg->dir_ + "/data"),
                                      " -A trust -U postgres --no-sync -E UTF8 --locale=C"));
  if (rc != 0) return absl::InternalError(absl::StrCat("initdb failed: ", out));
  const std::string options =
      absl::StrCat("-k ", pg->dir_, " -p 5432 -c listen_addresses= -c max_connections=200",
                   durable ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
  std::tie(rc, out) = Shell(absl::StrCat(as, pg->bin_, "/pg_ctl -D ", Quote(pg->dir_ + "/data"), " -l ",
                                         Quote(pg->dir_ + "/server.log"), " -w -t 60 -o ", Quote(options), " start"));
  if (rc != 0) {
    std::ifstream log(pg->dir_ + "/server.log");
    std::stringstream text;
    text << log.rdbuf();
    return absl::InternalError(absl::StrCat("pg_ctl start failed: ", out, text.str()));
  }
  pg->started_ = true;
  return pg;
}

PostgresServer::~PostgresServer() {
  if (started_) {
    Shell(absl::StrCat(as_postgres_ ? "runuser -u postgres -- " : "", bin_, "/pg_ctl -D ", Quote(dir_ + "/data"),
                       " -m immediate -w stop"));
  }
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::string PostgresServer::Url(const std::string& database) const {
  return absl::StrCat("postgresql://postgres@/", database, "?host=", dir_, "&port=5432");
}

absl::StatusOr<std::string> PostgresServer::Psql(const std::string& database, const std::string& sql) const {
  auto [rc, out] =
      Shell(absl::StrCat(bin_, "/psql -X -A -t -v ON_ERROR_STOP=1 ", Quote(Url(database)), " -c ", Quote(sql)));
  if (rc != 0) return absl::InternalError(absl::StrCat("psql: ", out));
  return std::string(absl::StripAsciiWhitespace(out));
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase(const std::string& name) const {
  if (auto r = Psql("postgres", absl::StrCat("CREATE DATABASE ", name)); !r.ok()) return r.status();
  return Url(name);
}

absl::StatusOr<std::string> FreshTestDatabase() {
  static std::mutex mu;
  static std::unique_ptr<PostgresServer> server;
  static int next = 0;
  std::lock_guard<std::mutex> l(mu);
  if (server == nullptr) {
    auto started = PostgresServer::Start();
    if (!started.ok()) return started.status();
    server = std::move(*started);
    // Stopped when the process exits normally.
    std::atexit([] { server.reset(); });
  }
  return server->CreateDatabase(absl::StrCat("t", getpid(), "_", next++));
}

}  // namespace hetbench::testing
