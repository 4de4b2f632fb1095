#pragma once
/// What the PostgreSQL job store's files share (internal to server/store):
/// statement parameters, PostgreSQL's binary formats written (array
/// parameters, COPY rows), and reading binary result columns (integers in
/// network byte order, bytes, protobuf messages).

#include <endian.h>
#include <libpq-fe.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/pg_job_store.h"

namespace hetbench::server {

/// Parameters of one statement: text, except bytea sent as binary.
struct PgJobStore::Params {
  std::vector<std::string> values;
  std::vector<bool> is_null, binary;
  Params& Text(std::string v) {
    values.push_back(std::move(v));
    is_null.push_back(false);
    binary.push_back(false);
    return *this;
  }
  Params& Int(int64_t v) { return Text(absl::StrCat(v)); }
  Params& Real(double v) { return Text(absl::StrCat(v)); }
  Params& Bytes(std::string v) {
    Text(std::move(v));
    binary.back() = true;
    return *this;
  }
  Params& Null() {
    Text("");
    is_null.back() = true;
    return *this;
  }
  /// The arrays PQexecPrepared and PQsendQueryPrepared take (pointing into `values`).
  struct Arrays {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    int n() const { return static_cast<int>(values.size()); }
  };
  Arrays ForLibpq() const {
    Arrays a;
    for (size_t i = 0; i < values.size(); ++i) {
      a.values.push_back(is_null[i] ? nullptr : values[i].c_str());
      a.lengths.push_back(static_cast<int>(values[i].size()));
      a.formats.push_back(binary[i] ? 1 : 0);
    }
    return a;
  }
};

namespace pg {

/// Fields as PostgreSQL's binary formats write them (an array's elements, a
/// COPY row's columns): each its length, then its bytes, integers in network
/// byte order; appended to a string.
class BinaryWriter {
 public:
  void Int4(int32_t v) {
    Put32(4);
    Put32(static_cast<uint32_t>(v));
  }
  void Int8(int64_t v) {
    Put32(8);
    Put64(static_cast<uint64_t>(v));
  }
  void Bytes(std::string_view b) {
    Put32(static_cast<uint32_t>(b.size()));
    out_.append(b);
  }
  std::string Take() { return std::move(out_); }
  const std::string& bytes() const { return out_; }
  void Clear() { out_.clear(); }

 protected:
  void Put16(uint16_t v) {
    const uint16_t be = htobe16(v);
    out_.append(reinterpret_cast<const char*>(&be), 2);
  }
  void Put32(uint32_t v) {
    const uint32_t be = htobe32(v);
    out_.append(reinterpret_cast<const char*>(&be), 4);
  }
  void Put64(uint64_t v) {
    const uint64_t be = htobe64(v);
    out_.append(reinterpret_cast<const char*>(&be), 8);
  }
  std::string out_;
};

/// A one-dimensional array parameter in PostgreSQL's binary array format
/// (what array_recv reads): dimensions, no nulls, the element type's OID,
/// then each element as its length and bytes (integers in network order).
class BinaryArray : public BinaryWriter {
 public:
  static constexpr uint32_t kText = 25, kInt4 = 23, kInt8 = 20, kBytea = 17;  // pg_type OIDs
  BinaryArray(uint32_t element_type, size_t count) {
    Put32(1);  // dimensions
    Put32(0);  // no nulls
    Put32(element_type);
    Put32(static_cast<uint32_t>(count));
    Put32(1);  // lower bound
  }
};

/// COPY ... FROM STDIN (FORMAT binary)'s data: the signature, then rows of
/// fields (each its length and bytes, integers in network order), then the
/// trailer. Taken in pieces: Take() or Clear() after the header keeps going.
class BinaryCopy : public BinaryWriter {
 public:
  BinaryCopy() {
    out_.append("PGCOPY\n\377\r\n\0", 11);
    Put32(0);  // flags: no OIDs
    Put32(0);  // no header extension
  }
  void Row(int fields) { Put16(static_cast<uint16_t>(fields)); }
  void End() { Put16(0xffff); }  // -1 fields: no more rows
};

// Binary result columns: integers and float8 in network byte order.
inline int64_t GetInt(const PGresult* res, int row, int col) {
  const char* p = PQgetvalue(res, row, col);
  switch (PQgetlength(res, row, col)) {
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<int16_t>(be16toh(v));
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<int32_t>(be32toh(v));
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<int64_t>(be64toh(v));
    }
    default:
      return 0;
  }
}

inline std::string_view GetBytes(const PGresult* res, int row, int col) {
  return std::string_view(PQgetvalue(res, row, col), static_cast<size_t>(PQgetlength(res, row, col)));
}

template <typename Message>
bool ParseColumn(const PGresult* res, int row, int col, Message* m) {
  const std::string_view b = GetBytes(res, row, col);
  return m->ParseFromArray(b.data(), static_cast<int>(b.size()));
}

}  // namespace pg
}  // namespace hetbench::server
