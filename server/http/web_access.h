#pragma once
/// Who may read the web UI, and by which name. Three guards:
/// - **Host**: a request whose Host header is not one of the UI's names is
///   refused (421), so a page of another site cannot read it through DNS
///   rebinding. Its names: loopback (localhost, 127.0.0.1, [::1]) and the
///   address it listens on, with its port, and every --http-allowed-host.
/// - **Login**: with bearer tokens configured a request needs a client
///   token, as an `Authorization: Bearer` header (scripts) or a session
///   cookie a browser gets from the login form: the token is checked once,
///   the cookie holds a random session id (never the token), HttpOnly,
///   SameSite=Strict, Secure over TLS, for `session_ttl`.
/// - **Origin**: a form posted from another origin (a login or logout) is
///   refused.
///
/// Threading: thread-safe (the HTTP server's threads).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security.h"

namespace hetbench::server {

struct WebAccessOptions {
  std::string listen_host;                 // as bound, e.g. "127.0.0.1", "0.0.0.0"
  int port = 0;                            // as bound
  std::vector<std::string> allowed_hosts;  // --http-allowed-host: NAME or NAME:PORT
  bool tls = false;                        // served over HTTPS: the cookie is Secure
  absl::Duration session_ttl = absl::Hours(12);
};

class WebAccess {
 public:
  static constexpr char kCookie[] = "hetbench_session";

  WebAccess(WebAccessOptions options, const Authorizer* auth);

  /// Whether `host` (a Host header) names this UI.
  bool HostAllowed(absl::string_view host) const;
  /// Whether `origin` (an Origin header; "" when absent) is this UI's own:
  /// its host part must be one of its names.
  bool OriginAllowed(absl::string_view origin) const;
  /// OK for a request with a client token in `authorization` or a live
  /// session in `cookie` (the Cookie header), or when no tokens are
  /// configured; UNAUTHENTICATED or PERMISSION_DENIED (an agent's token)
  /// otherwise.
  grpc::Status Check(const std::string& authorization, const std::string& cookie, absl::Time now);
  /// A new session for `token` when it is a client's: its id.
  absl::StatusOr<std::string> Login(const std::string& token, absl::Time now);
  /// Ends the session in `cookie`, if any.
  void Logout(const std::string& cookie);
  /// The Set-Cookie value for session `id`, and one that clears it.
  std::string SessionCookie(const std::string& id) const;
  std::string ClearedCookie() const;
  bool tokens_configured() const { return auth_->tokens_configured(); }
  size_t sessions() const;

 private:
  /// The session id in a Cookie header, or "".
  static std::string SessionId(absl::string_view cookie);
  bool NameAllowed(absl::string_view name, absl::string_view port) const;

  const WebAccessOptions options_;
  const Authorizer* const auth_;
  mutable absl::Mutex mu_;
  std::map<std::string, absl::Time> sessions_ ABSL_GUARDED_BY(mu_);  // id -> expiry
};

}  // namespace hetbench::server
