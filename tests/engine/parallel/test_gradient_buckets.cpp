// The bucket plan of the data-parallel gradient sum (parallel/gradient_exchange.hpp): which
// parameters land in which bucket, in backward order, where each bucket lies in the flat
// buffer, and after which layer's backward it may start. The plan is a function of the layer
// order and the cap only, which is what keeps the ranks' sums in step.

#include "engine_test_support.hpp"
#include "parallel/gradient_exchange.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

namespace {

dl::Param param(const std::string& name, int count, std::size_t layer) {
    return dl::Param{name, std::make_shared<dl::Tensor>(std::vector<int>{count}), {}, layer};
}

std::vector<std::string> names(const std::vector<dl::Param>& params,
                               const dl::GradientBucket& bucket) {
    std::vector<std::string> out;
    for (const std::size_t p : bucket.params) {
        out.push_back(params[p].name);
    }
    return out;
}

// LeNet's parameters: conv1 (layer 1), conv2 (3), ip1 (5), ip2 (7), weights then bias.
std::vector<dl::Param> lenet_params() {
    return {param("conv1.0", 500, 1), param("conv1.1", 20, 1),   param("conv2.0", 25000, 3),
            param("conv2.1", 50, 3),  param("ip1.0", 400000, 5), param("ip1.1", 500, 5),
            param("ip2.0", 5000, 7),  param("ip2.1", 10, 7)};
}

using Names = std::vector<std::string>;

TEST(GradientBuckets, NoCapIsOneBucketOfEveryParameterInBackwardOrder) {
    const auto params = lenet_params();
    const auto buckets = dl::plan_buckets(params, 0);
    ASSERT_EQ(buckets.size(), 1U);
    EXPECT_EQ(names(params, buckets[0]), (Names{"ip2.1", "ip2.0", "ip1.1", "ip1.0", "conv2.1",
                                                "conv2.0", "conv1.1", "conv1.0"}));
    EXPECT_EQ(buckets[0].offset, 0U);
    EXPECT_EQ(buckets[0].count, 431080U);
    EXPECT_EQ(buckets[0].ready_after, 1U); // conv1's backward completes it
}

TEST(GradientBuckets, ABucketClosesOnceItHoldsTheCapAndNeverSplitsAParameter) {
    const auto params = lenet_params();
    // 1 MiB of floats: ip2 and the 400,000 floats of ip1 (one parameter past the cap), then
    // the convolutions.
    const auto buckets = dl::plan_buckets(params, 262144);
    ASSERT_EQ(buckets.size(), 2U);
    EXPECT_EQ(names(params, buckets[0]), (Names{"ip2.1", "ip2.0", "ip1.1", "ip1.0"}));
    EXPECT_EQ(buckets[0].offset, 0U);
    EXPECT_EQ(buckets[0].count, 405510U);
    EXPECT_EQ(buckets[0].ready_after, 5U);
    EXPECT_EQ(names(params, buckets[1]), (Names{"conv2.1", "conv2.0", "conv1.1", "conv1.0"}));
    EXPECT_EQ(buckets[1].offset, 405510U);
    EXPECT_EQ(buckets[1].count, 25570U);
    EXPECT_EQ(buckets[1].ready_after, 1U);

    // 10 KiB: ip2 | ip1 | conv2 | conv1, each layer's bias first.
    const auto small = dl::plan_buckets(params, 2560);
    ASSERT_EQ(small.size(), 4U);
    EXPECT_EQ(names(params, small[0]), (Names{"ip2.1", "ip2.0"}));
    EXPECT_EQ(names(params, small[1]), (Names{"ip1.1", "ip1.0"}));
    EXPECT_EQ(names(params, small[2]), (Names{"conv2.1", "conv2.0"}));
    EXPECT_EQ(names(params, small[3]), (Names{"conv1.1", "conv1.0"}));
    std::size_t offset = 0;
    for (const auto& bucket : small) {
        EXPECT_EQ(bucket.offset, offset);
        offset += bucket.count;
    }
    EXPECT_EQ(offset, 431080U);
    EXPECT_EQ(small[0].ready_after, 7U);
    EXPECT_EQ(small[3].ready_after, 1U);

    // One float: a bucket per parameter.
    EXPECT_EQ(dl::plan_buckets(params, 1).size(), params.size());
}

// A bucket of parameters of several layers may start only after the lowest of them.
TEST(GradientBuckets, ABucketIsReadyAfterTheFirstOfItsLayers) {
    const std::vector<dl::Param> params = {param("a.0", 3, 2), param("b.0", 3, 4),
                                           param("c.0", 3, 6)};
    const auto buckets = dl::plan_buckets(params, 5);
    ASSERT_EQ(buckets.size(), 2U);
    EXPECT_EQ(names(params, buckets[0]), (Names{"c.0", "b.0"}));
    EXPECT_EQ(buckets[0].ready_after, 4U);
    EXPECT_EQ(names(params, buckets[1]), (Names{"a.0"}));
    EXPECT_EQ(buckets[1].ready_after, 2U);
}

// The net says which layer owns each parameter, and its backward pass calls after_layer once
// per layer that runs backward, last layer first: the points where buckets start.
TEST(GradientBuckets, TheNetNamesEachParametersLayerAndReportsLayersInBackwardOrder) {
    dl_test::TempDir dir;
    dl::NetConfig config = dl::load_config(dl_test::make_tiny_workspace(dir.path(), 1));
    for (auto& layer : config.layers) {
        if (layer.type == "Data") {
            layer.shape = {1, 8, 8};
        }
    }
    auto backend = dl::make_backend("cpu", 1);
    dl::Net net(config, dl::Phase::train, *backend, 7);
    const auto layers = net.layer_names();
    for (const auto& p : net.params()) {
        ASSERT_LT(p.layer, layers.size());
        EXPECT_EQ(p.name.substr(0, p.name.find('.')), layers[p.layer]) << p.name;
    }
    net.forward();
    std::vector<std::string> seen;
    net.backward([&](std::size_t layer) { seen.push_back(layers.at(layer)); });
    // Data and the test-only Accuracy run no backward; in-place ReLU and Dropout do.
    EXPECT_EQ(seen, (Names{"loss", "ip2", "drop1", "relu1", "ip1", "pool1", "conv1"}));
}

TEST(GradientBuckets, TheCapComesFromDltrainBucketMb) {
    ::unsetenv("DLTRAIN_BUCKET_MB");
    EXPECT_EQ(dl::bucket_cap_floats(), 25U * 262144U);
    ::setenv("DLTRAIN_BUCKET_MB", "0", 1);
    EXPECT_EQ(dl::bucket_cap_floats(), 0U);
    ::setenv("DLTRAIN_BUCKET_MB", "0.5", 1);
    EXPECT_EQ(dl::bucket_cap_floats(), 131072U);
    for (const char* bad : {"-1", "lots", "1MB", "nan"}) {
        ::setenv("DLTRAIN_BUCKET_MB", bad, 1);
        try {
            (void)dl::bucket_cap_floats();
            ADD_FAILURE() << bad << " accepted";
        } catch (const dl::Error& e) {
            EXPECT_EQ(e.kind(), dl::ErrorKind::usage);
            EXPECT_NE(std::string(e.what()).find("DLTRAIN_BUCKET_MB='" + std::string(bad)),
                      std::string::npos)
                << e.what();
        }
    }
    ::unsetenv("DLTRAIN_BUCKET_MB");
}

} // namespace
