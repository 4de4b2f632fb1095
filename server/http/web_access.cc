#include "server/http/web_access.h"

#include <sys/random.h>

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hetbench::server {

namespace {

// "name:port", "[v6]:port", "name" -> (name, port) with the brackets kept.
std::pair<absl::string_view, absl::string_view> SplitHostPort(absl::string_view host) {
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return {host, ""};
    const absl::string_view rest = host.substr(close + 1);
    return {host.substr(0, close + 1), absl::StartsWith(rest, ":") ? rest.substr(1) : ""};
  }
  const size_t colon = host.rfind(':');
  if (colon == absl::string_view::npos) return {host, ""};
  return {host.substr(0, colon), host.substr(colon + 1)};
}

}  // namespace

WebAccess::WebAccess(WebAccessOptions options, const Authorizer* auth) : options_(std::move(options)), auth_(auth) {}

bool WebAccess::NameAllowed(absl::string_view name, absl::string_view port) const {
  const std::string own_port = absl::StrCat(options_.port);
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  const bool loopback = lower == "localhost" || lower == "127.0.0.1" || lower == "[::1]";
  const bool bound =
      !options_.listen_host.empty() && options_.listen_host != "0.0.0.0" && options_.listen_host != "::" &&
      (lower == absl::AsciiStrToLower(options_.listen_host) || lower == absl::StrCat("[", options_.listen_host, "]"));
  if ((loopback || bound) && (port.empty() || port == own_port)) return true;
  for (const std::string& allowed : options_.allowed_hosts) {
    const auto [a_name, a_port] = SplitHostPort(allowed);
    if (absl::AsciiStrToLower(std::string(a_name)) != lower) continue;
    if (a_port.empty() ? (port.empty() || port == own_port) : port == a_port) return true;
  }
  return false;
}

bool WebAccess::HostAllowed(absl::string_view host) const {
  if (host.empty()) return false;
  const auto [name, port] = SplitHostPort(host);
  return NameAllowed(name, port);
}

bool WebAccess::OriginAllowed(absl::string_view origin) const {
  if (origin.empty()) return true;  // not a cross-site form post: browsers send Origin with those
  absl::string_view rest = origin;
  if (!absl::ConsumePrefix(&rest, "https://") && !absl::ConsumePrefix(&rest, "http://")) return false;
  return HostAllowed(rest);
}

std::string WebAccess::SessionId(absl::string_view cookie) {
  for (absl::string_view part : absl::StrSplit(cookie, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, kCookie) && absl::ConsumePrefix(&part, "=")) return std::string(part);
  }
  return "";
}

grpc::Status WebAccess::Check(const std::string& authorization, const std::string& cookie, absl::Time now) {
  if (!auth_->tokens_configured()) return grpc::Status::OK;
  if (!authorization.empty()) return auth_->CheckBearer(authorization, Role::kClient);
  if (const std::string id = SessionId(cookie); !id.empty()) {
    absl::MutexLock l(&mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end() && it->second > now) return grpc::Status::OK;
    if (it != sessions_.end()) sessions_.erase(it);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the session has ended; log in again at /login");
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "a client token is required: log in at /login, or send Authorization: Bearer TOKEN");
}

absl::StatusOr<std::string> WebAccess::Login(const std::string& token, absl::Time now) {
  const grpc::Status s = auth_->CheckBearer(absl::StrCat("Bearer ", token), Role::kClient);
  if (!s.ok()) {
    return s.error_code() == grpc::StatusCode::PERMISSION_DENIED
               ? absl::PermissionDeniedError("an agent's token cannot read the web UI; use a client token")
               : absl::UnauthenticatedError("not a token of this coordinator");
  }
  std::array<unsigned char, 32> bytes{};
  if (getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    return absl::UnavailableError("no randomness for a session id; try again");
  }
  std::string id;
  for (unsigned char b : bytes) absl::StrAppend(&id, absl::StrFormat("%02x", b));
  absl::MutexLock l(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {  // the ended ones go
    it = it->second <= now ? sessions_.erase(it) : std::next(it);
  }
  sessions_[id] = now + options_.session_ttl;
  return id;
}

void WebAccess::Logout(const std::string& cookie) {
  const std::string id = SessionId(cookie);
  absl::MutexLock l(&mu_);
  sessions_.erase(id);
}

std::string WebAccess::SessionCookie(const std::string& id) const {
  return absl::StrCat(kCookie, "=", id,
                      "; Path=/; HttpOnly; SameSite=Strict; Max-Age=", absl::ToInt64Seconds(options_.session_ttl),
                      options_.tls ? "; Secure" : "");
}

std::string WebAccess::ClearedCookie() const {
  return absl::StrCat(kCookie, "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0", options_.tls ? "; Secure" : "");
}

size_t WebAccess::sessions() const {
  absl::MutexLock l(&mu_);
  return sessions_.size();
}

}  // namespace hetbench::server
