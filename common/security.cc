#include "common/security.h"

#include <grpcpp/client_context.h>
#include <grpcpp/security/auth_context.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hetbench {

namespace {

constexpr size_t kMinTokenLength = 16;

// Compares without an early exit, so timing does not tell how much of a
// guess was right.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

const char* RoleName(Role role) { return role == Role::kAgent ? "agent" : "client"; }

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerSecurity& s) {
  if (s.tls_cert.empty() != s.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both, or neither for plaintext");
  }
  if (s.tls_cert.empty()) {
    if (!s.tls_client_ca.empty() || s.require_agent_cert) {
      return absl::InvalidArgumentError("--tls-client-ca and --require-agent-cert need TLS: give --tls-cert/--tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (s.require_agent_cert && s.tls_client_ca.empty()) {
    return absl::InvalidArgumentError("--require-agent-cert needs --tls-client-ca (the CA that signs agent certificates)");
  }
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  auto cert = ReadSecretFile(s.tls_cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadSecretFile(s.tls_key, "--tls-key");
  if (!key.ok()) return key.status();
  pair.cert_chain = *cert;
  pair.private_key = *key;
  options.pem_key_cert_pairs.push_back(pair);
  if (!s.tls_client_ca.empty()) {
    auto ca = ReadSecretFile(s.tls_client_ca, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    // Verify a certificate when one is presented; the agent gateway then
    // insists on one (require_agent_cert), the client API does not.
    options.client_certificate_request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const ClientSecurity& s) {
  if (s.tls_cert.empty() != s.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both, or neither");
  }
  if (s.tls_ca.empty()) {
    if (!s.tls_cert.empty()) return absl::InvalidArgumentError("--tls-cert needs --tls-ca (the coordinator's CA)");
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  auto ca = ReadSecretFile(s.tls_ca, "--tls-ca");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *ca;
  if (!s.tls_cert.empty()) {
    auto cert = ReadSecretFile(s.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadSecretFile(s.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<TokenTable> TokenTable::Parse(const std::string& text, const std::string& source) {
  TokenTable t;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(source, ":", line_no);
    if (parts.size() != 2) return absl::InvalidArgumentError(absl::StrCat(where, ": expected \"ROLE TOKEN\""));
    Role role;
    if (parts[0] == "agent") {
      role = Role::kAgent;
    } else if (parts[0] == "client") {
      role = Role::kClient;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": role \"", parts[0], "\" is unknown; use agent or client"));
    }
    if (parts[1].size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": token shorter than ", kMinTokenLength,
                                                     " characters; use e.g. `openssl rand -hex 32`"));
    }
    if (!t.roles_.emplace(parts[1], role).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": token repeats an earlier line's"));
    }
  }
  if (t.roles_.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no tokens"));
  return t;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  auto text = ReadSecretFile(path, "--token-file");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

size_t TokenTable::count(Role role) const {
  size_t n = 0;
  for (const auto& [token, r] : roles_) n += r == role;
  return n;
}

absl::StatusOr<Role> TokenTable::RoleOf(const std::string& authorization) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError("no bearer token: give one with --token-file (metadata authorization)");
  }
  absl::string_view v = authorization;
  if (!absl::ConsumePrefix(&v, "Bearer ")) {
    return absl::UnauthenticatedError("authorization metadata is not \"Bearer <token>\"");
  }
  const std::string token(v);
  std::optional<Role> found;
  for (const auto& [known, role] : roles_) {  // every entry compared: no early exit on a match
    if (ConstantTimeEquals(known, token)) found = role;
  }
  if (!found) return absl::UnauthenticatedError("unknown bearer token");
  return *found;
}

grpc::Status Authorizer::Check(const grpc::ServerContextBase& ctx, Role role) const {
  if (role == Role::kAgent && require_agent_cert_) {
    auto auth = ctx.auth_context();
    if (auth == nullptr || !auth->IsPeerAuthenticated()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "agents need a client certificate signed by the coordinator's --tls-client-ca");
    }
  }
  if (tokens_.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  return CheckBearer(it == md.end() ? "" : std::string(it->second.data(), it->second.size()), role);
}

grpc::Status Authorizer::CheckBearer(const std::string& value, Role role) const {
  if (tokens_.empty()) return grpc::Status::OK;
  auto got = tokens_.RoleOf(value);
  if (!got.ok()) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(got.status().message()));
  if (*got != role) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("a token of role ", RoleName(*got), " may not call the ", RoleName(role),
                                     " API"));
  }
  return grpc::Status::OK;
}

void AddToken(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

absl::StatusOr<std::string> LoadCallerToken(const std::string& path) {
  if (path.empty()) return std::string();
  auto text = ReadSecretFile(path, "--token-file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("--token-file ", path, ": empty"));
  return token;
}

}  // namespace hetbench
