#pragma once
// LMDB databases (liblmdb), read-only, behind a header that shows no LMDB type: what
// `dljob pack` needs to pack Caffe's databases of Datums (convert_imageset, create_mnist.sh).

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dljob::adapters {

/// Whether `directory` is an LMDB environment (it holds data.mdb), as Caffe's LMDBs are.
bool is_lmdb_directory(const std::string& directory);

/// Calls `visit` for every record of the database in `directory`, in key order (LMDB's byte
/// order, as Caffe's Data layer reads it), stopping at the first error it returns. Opened as
/// Caffe opens it (read-only, no thread-local reader slots), again without the lock file where
/// that cannot be created (a read-only file system). The views live until `visit` returns.
Result<void>
for_each_lmdb_record(const std::string& directory,
                     const std::function<Result<void>(std::uint64_t index, std::string_view key,
                                                      std::string_view value)>& visit);

} // namespace dljob::adapters
