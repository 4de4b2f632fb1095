#pragma once
/// Transport security and authorization shared by the coordinator, agents
/// and the CLI: TLS (optionally mutual, for agents) with gRPC's credentials,
/// and bearer tokens with two roles. Tokens are secrets: nothing here logs
/// or returns one, and errors name the file and line, never the value.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hetbench {

/// Who may call what: agents may only Connect; clients only the client API.
enum class Role { kAgent, kClient };
const char* RoleName(Role role);

/// The coordinator's side.
struct ServerSecurity {
  std::string tls_cert;        // PEM files; both empty = plaintext (loopback use)
  std::string tls_key;
  std::string tls_client_ca;   // verifies client certificates when presented (mutual TLS)
  bool require_agent_cert = false;  // agents must present a certificate signed by tls_client_ca
  std::string token_file;      // "ROLE TOKEN" per line (roles: agent, client); empty = no tokens
};

/// An agent's or the CLI's side.
struct ClientSecurity {
  std::string tls_ca;    // the coordinator's CA (PEM); empty = plaintext
  std::string tls_cert;  // client certificate and key for mutual TLS (agents)
  std::string tls_key;
  std::string token_file;  // a file holding this caller's token; empty = none
};

/// Reads a whole file; `what` names the flag for the error.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerSecurity& s);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const ClientSecurity& s);

/// Bearer tokens and their roles, loaded once from a token file.
class TokenTable {
 public:
  /// Parses "ROLE TOKEN" lines ('#' comments, blank lines allowed). Errors
  /// name the file and the line; tokens shorter than 16 characters are refused.
  static absl::StatusOr<TokenTable> Parse(const std::string& text, const std::string& source);
  static absl::StatusOr<TokenTable> Load(const std::string& path);
  bool empty() const { return roles_.empty(); }
  size_t size() const { return roles_.size(); }
  size_t count(Role role) const;
  /// The role of the "authorization: Bearer <token>" value, or
  /// UNAUTHENTICATED saying what is wrong (missing, malformed, unknown).
  absl::StatusOr<Role> RoleOf(const std::string& authorization) const;

 private:
  std::map<std::string, Role> roles_;
};

/// Checks a call: with tokens configured, it needs a token of `role`
/// (UNAUTHENTICATED without a known token, PERMISSION_DENIED with another
/// role's); with `require_peer_cert`, a verified client certificate.
class Authorizer {
 public:
  Authorizer() = default;
  Authorizer(TokenTable tokens, bool require_agent_cert)
      : tokens_(std::move(tokens)), require_agent_cert_(require_agent_cert) {}
  grpc::Status Check(const grpc::ServerContextBase& ctx, Role role) const;
  /// The same for an "authorization" header value of another protocol (the
  /// web UI's HTTP): OK when no tokens are configured.
  grpc::Status CheckBearer(const std::string& authorization, Role role) const;
  bool tokens_configured() const { return !tokens_.empty(); }

 private:
  TokenTable tokens_;
  bool require_agent_cert_ = false;
};

/// Adds this caller's token to a call (no-op without one).
void AddToken(grpc::ClientContext* ctx, const std::string& token);
/// The token in `path` (trimmed), or "" when path is empty.
absl::StatusOr<std::string> LoadCallerToken(const std::string& path);

}  // namespace hetbench
