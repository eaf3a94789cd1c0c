// Tensors in backend memory, the generic input stage and the backend table: the parts of the
// backend interface that every backend shares, checked on the CPU.

#include "cpu/thread_pool.hpp"

#include <dl/backend.hpp>
#include <dl/error.hpp>
#include <dl/tensor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace dl {
namespace {

TEST(BackendMemory, TensorsRoundTripThroughHostCopies) {
    auto backend = make_backend("cpu", 1);
    Tensor t({2, 3}, backend.get());
    EXPECT_EQ(t.count(), 6U);
    EXPECT_EQ(t.read_data(), std::vector<float>(6, 0.0F)) << "new storage is zeroed";
    const std::vector<float> values = {1, 2, 3, 4, 5, 6};
    t.write_data(values.data());
    t.write_diff(values.data());
    EXPECT_EQ(t.read_data(), values);
    EXPECT_EQ(t.read_diff(), values);
    EXPECT_EQ(t.read_scalar(), 1.0F);
    EXPECT_EQ(&t.memory(), backend.get());
    // Moved tensors keep their storage; reshaped ones get new, zeroed storage in the same memory.
    Tensor moved = std::move(t);
    EXPECT_EQ(moved.read_data(), values);
    moved.reshape({4});
    EXPECT_EQ(moved.read_data(), std::vector<float>(4, 0.0F));
    EXPECT_EQ(&moved.memory(), backend.get());
    EXPECT_EQ(&Tensor({1}).memory(), &host_memory()) << "the default is host memory";
}

TEST(BackendMemory, GenericInputStageCopiesEachSlotIntoTheInputs) {
    auto backend = make_backend("cpu", 1);
    auto stage = backend->make_input_stage({4, 2}, 2);
    ASSERT_NE(stage->host(0, 0), stage->host(1, 0)) << "slots have their own buffers";
    for (int slot = 0; slot < 2; ++slot) {
        std::fill(stage->host(slot, 0), stage->host(slot, 0) + 4, static_cast<float>(slot + 1));
        std::fill(stage->host(slot, 1), stage->host(slot, 1) + 2, static_cast<float>(slot + 10));
        stage->upload(slot);
    }
    Tensor data({4}, backend.get());
    Tensor labels({2}, backend.get());
    stage->consume(1, {data.data(), labels.data()});
    EXPECT_EQ(data.read_data(), std::vector<float>(4, 2.0F));
    EXPECT_EQ(labels.read_data(), std::vector<float>(2, 11.0F));
    stage->consume(0, {data.data(), nullptr}); // no label tensor: that buffer is skipped
    EXPECT_EQ(data.read_data(), std::vector<float>(4, 1.0F));
    EXPECT_EQ(labels.read_data(), std::vector<float>(2, 11.0F));
}

TEST(BackendMemory, TheCpuBackendRunsStepsDirectlyInsteadOfRecording) {
    auto backend = make_backend("cpu", 1);
    int runs = 0;
    EXPECT_EQ(backend->record([&] { ++runs; }), nullptr);
    EXPECT_EQ(runs, 0) << "record() must not run the work";
}

TEST(BackendTable, UnknownDevicesAreUsageErrorsNamingTheChoices) {
    try {
        make_backend("tpu", 1);
        FAIL() << "no error for an unknown device";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::usage);
        EXPECT_NE(std::string(e.what()).find("cpu, cuda, cuda:N"), std::string::npos) << e.what();
    }
    try {
        make_backend("cuda:first", 1);
        FAIL() << "no error for a malformed GPU index";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::usage);
    }
    EXPECT_EQ(make_backend("cpu", 1)->threads(), 1);
    // More threads than this process may run on are capped to those it may (each costs memory).
    EXPECT_EQ(make_backend("cpu", 3000)->threads(), cpu::usable_cpus());
    EXPECT_EQ(make_backend("cpu", 0)->threads(), cpu::usable_cpus());
    const auto names = backend_names();
    EXPECT_EQ(names.front(), "cpu");
}

} // namespace
} // namespace dl
