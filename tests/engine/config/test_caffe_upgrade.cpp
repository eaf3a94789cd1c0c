// Caffe's own upgrade tests (src/caffe/test/test_upgrade_proto.cpp), their nets kept as files in
// tests/fixtures/bvlc-caffe/upgrade: each V0 net upgraded here must equal the V1 net Caffe's test
// expects, field for field, and each V1 net the V2 one. The padding cases compare the upgrade of
// Caffe's input with the upgrade of its expected, padding-free V0 output.
#include "config/prototxt_upgrade.hpp"
#include "test_paths.hpp"

#include <caffe.pb.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dl {
namespace {
namespace fs = std::filesystem;

caffe::NetParameter read_case(const std::string& name) {
    const fs::path file = fs::path(DLJOB_SOURCE_DIR) / "tests/fixtures/bvlc-caffe/upgrade" / name;
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    caffe::NetParameter net;
    EXPECT_TRUE(in.good() && google::protobuf::TextFormat::ParseFromString(text.str(), &net))
        << file;
    return net;
}

// UpgradeV0Net's result: the upgraded layers, with the net's name and inputs as they were.
caffe::NetParameter upgraded_v0(const caffe::NetParameter& v0) {
    const V0Upgrade upgrade = upgrade_v0_net(v0);
    EXPECT_EQ(upgrade.failed, -1) << upgrade.why;
    caffe::NetParameter v1;
    v1.set_name(v0.name());
    v1.mutable_layers()->Add(upgrade.layers.begin(), upgrade.layers.end());
    v1.mutable_input()->CopyFrom(v0.input());
    v1.mutable_input_dim()->CopyFrom(v0.input_dim());
    return v1;
}

// UpgradeV1Net's result: every V1 layer as a LayerParameter.
caffe::NetParameter upgraded_v1(const caffe::NetParameter& v1) {
    caffe::NetParameter v2 = v1;
    v2.clear_layers();
    for (const caffe::V1LayerParameter& layer : v1.layers()) {
        std::string why;
        *v2.add_layer() = upgrade_v1_layer(layer, why);
        EXPECT_EQ(why, "") << layer.name();
    }
    return v2;
}

TEST(CaffeUpgrade, PaddingLayersFoldAsCaffesTestsExpect) {
    for (const std::string name : {"padding_simple", "padding_two_tops", "padding_imagenet"}) {
        const std::string input = name == "padding_imagenet" ? "imagenet" : name;
        EXPECT_EQ(upgraded_v0(read_case(input + ".v0.prototxt")).DebugString(),
                  upgraded_v0(read_case(name + ".padded.prototxt")).DebugString())
            << name;
    }
}

TEST(CaffeUpgrade, V0NetsUpgradeToCaffesExpectedV1) {
    for (const std::string name : {"simple", "all_params", "imagenet"}) {
        const caffe::NetParameter expected = read_case(name + ".v1.prototxt");
        ASSERT_GT(expected.layers_size(), 0) << name;
        EXPECT_EQ(upgraded_v0(read_case(name + ".v0.prototxt")).DebugString(),
                  expected.DebugString())
            << name;
    }
}

TEST(CaffeUpgrade, V1NetsUpgradeToCaffesExpectedV2) {
    for (const std::string name : {"simple", "imagenet"}) {
        const caffe::NetParameter expected = read_case(name + ".v2.prototxt");
        ASSERT_GT(expected.layer_size(), 0) << name;
        EXPECT_EQ(upgraded_v1(read_case(name + ".v1.prototxt")).DebugString(),
                  expected.DebugString())
            << name;
    }
}

} // namespace
} // namespace dl
