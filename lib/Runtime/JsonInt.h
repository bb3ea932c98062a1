#pragma once
// Internal: integers read from JSON kiln did not necessarily write (cache entries, report
// and tuning files). nlohmann's get<T>() converts a float (1e111) or an out-of-range
// integer with a plain cast: undefined behaviour, found by the cache-entry fuzzer. These
// accept an integer JSON number within T's range and throw kiln::Error otherwise (callers
// that decode a whole structure catch it and name the structure).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Runtime/Throw.h"
#include "kiln/error.hpp"

namespace kiln::detail {

/// Whether `j` is an integer JSON number within T's range (what jsonInt<T> accepts).
template <typename T>
bool isJsonInt(const nlohmann::json& j) {
  static_assert(std::is_integral_v<T> && std::is_signed_v<T>);
  if (!j.is_number_integer()) return false;
  if (j.is_number_unsigned()) return j.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
  return j.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) && j.get<int64_t>() <= int64_t(std::numeric_limits<T>::max());
}

template <typename T>
T jsonInt(const nlohmann::json& j) {
  if (!isJsonInt<T>(j))
    throwError(ErrorKind::InvalidArgument, j.dump().substr(0, 40) + " is not an integer in [" +
                                                std::to_string(std::numeric_limits<T>::min()) + ", " +
                                                std::to_string(std::numeric_limits<T>::max()) + "]");
  return T(j.get<int64_t>());
}

/// `j[key]` as jsonInt<T>, or `fallback` when `j` has no such key.
template <typename T>
T jsonIntOr(const nlohmann::json& j, const char* key, T fallback) {
  return j.contains(key) ? jsonInt<T>(j.at(key)) : fallback;
}

template <typename T>
std::vector<T> jsonInts(const nlohmann::json& j) {
  if (!j.is_array()) throwError(ErrorKind::InvalidArgument, j.dump().substr(0, 40) + " is not a list of integers");
  std::vector<T> out;
  out.reserve(j.size());
  for (const nlohmann::json& x : j) out.push_back(jsonInt<T>(x));
  return out;
}

} // namespace kiln::detail
