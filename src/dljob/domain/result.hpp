#pragma once
// Result<T>: a value or an Error, the shape of C++23 std::expected (which this toolchain's
// clang-tidy cannot parse yet) so it can be swapped for it later.

#include <dljob/domain/error.hpp>

#include <type_traits>
#include <utility>
#include <variant>

namespace dljob {

/// Wraps an Error so `return fail(...)` converts to any Result<T>.
struct Unexpected {
    Error error;
};

[[nodiscard]] inline Unexpected fail(ErrorCode code, std::string message, std::string hint = {}) {
    return Unexpected{Error{code, std::move(message), std::move(hint)}};
}
[[nodiscard]] inline Unexpected fail(Error error) {
    return Unexpected{std::move(error)};
}

template <class T> class [[nodiscard]] Result {
public:
    Result(T value) : m_state(std::in_place_index<0>, std::move(value)) {}
    Result(Unexpected unexpected) : m_state(std::in_place_index<1>, std::move(unexpected.error)) {}

    [[nodiscard]] bool has_value() const noexcept { return m_state.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    /// The value; throws Failure carrying the error when there is none.
    T& value() & {
        throw_if_error();
        return std::get<0>(m_state);
    }
    const T& value() const& {
        throw_if_error();
        return std::get<0>(m_state);
    }
    T&& value() && {
        throw_if_error();
        return std::get<0>(std::move(m_state));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    [[nodiscard]] const Error& error() const& { return std::get<1>(m_state); }

private:
    void throw_if_error() const {
        if (m_state.index() != 0) {
            throw Failure(std::get<1>(m_state));
        }
    }
    std::variant<T, Error> m_state;
};

template <> class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Unexpected unexpected) : m_error(std::move(unexpected.error)), m_ok(false) {}

    [[nodiscard]] bool has_value() const noexcept { return m_ok; }
    explicit operator bool() const noexcept { return m_ok; }
    void value() const {
        if (!m_ok) {
            throw Failure(m_error);
        }
    }
    [[nodiscard]] const Error& error() const& { return m_error; }

private:
    Error m_error;
    bool m_ok = true;
};

} // namespace dljob

/// Propagates an error from an expression returning Result<...> (ccache's TRY).
#define DLJOB_TRY(expr)                                                                            \
    do {                                                                                           \
        auto dljob_try_result_ = (expr);                                                           \
        if (!dljob_try_result_) {                                                                  \
            return ::dljob::Unexpected{dljob_try_result_.error()};                                 \
        }                                                                                          \
    } while (false)
