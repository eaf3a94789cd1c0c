#pragma once
// An environment made of a map, for code that reads variables through a GetEnv.

#include <dljob/domain/stage.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace dljob::test {

inline GetEnv env_of(std::map<std::string, std::string> values) {
    return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
        const auto it = values.find(name);
        return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

} // namespace dljob::test
