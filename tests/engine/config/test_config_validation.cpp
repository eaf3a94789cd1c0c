// One validator for every config format (config/config_validate.cpp): Caffe prototxt files once
// skipped the YAML reader's checks, so a stride or group of 0 was a SIGFPE, a uniform filler with
// min > max hung `check`, sizes of 4294967295 wrapped to -1, duplicate layer names and a second
// test_iter ended in a C++ or protobuf abort, and NaN or out-of-range values trained. Each is now
// a config error naming file:line:column, the key and the layer, in YAML's words.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

namespace dl {
namespace {

namespace fs = std::filesystem;

/// A net prototxt of one layer of `type` whose `block` (a *_param block, or other fields) is on
/// line 4.
std::string one_layer(const std::string& type, const std::string& block) {
    return "layer {\n  name: \"l\"\n  type: \"" + type + "\"\n  " + block + "\n}\n";
}

class ConfigValidation : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    /// load_config's error for `text` written as `name`, from the file's name on (the
    /// temporary directory varies).
    std::string error_of(const std::string& name, const std::string& text,
                         const std::vector<std::string>& overrides = {}) {
        const fs::path file = m_dir.path() / name;
        std::ofstream(file) << text;
        try {
            load_config(file, overrides);
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config) << e.what();
            const std::string message = e.what();
            const auto at = message.find(name);
            return at == std::string::npos ? message : message.substr(at);
        }
        ADD_FAILURE() << "no error for:\n" << text;
        return {};
    }

    void expect_error(const std::string& text, const std::string& starts,
                      const std::string& contains) {
        const std::string message = error_of("bad.prototxt", text);
        EXPECT_EQ(message.rfind(starts, 0), 0U) << message;
        EXPECT_NE(message.find(contains), std::string::npos) << message;
    }
};

TEST_F(ConfigValidation, ZeroStridesAndGroupsAreRefusedNamingLineColumnAndKey) {
    const std::string conv = "convolution_param { num_output: 2 kernel_size: 3 stride: 0 }";
    // The column of the field itself: line 4 is "  " + conv.
    const auto column = std::to_string(2 + conv.find("stride") + 1);
    expect_error(one_layer("Convolution", conv), "bad.prototxt:4:" + column + ": ",
                 "key 'stride' in layer 'l' must be at least 1 (got 0)");
    expect_error(
        one_layer("Convolution", "convolution_param { num_output: 2 kernel_size: 3 group: 0 }"),
        "bad.prototxt:4:", "key 'group' in layer 'l' must be at least 1 (got 0)");
    expect_error(one_layer("Pooling", "pooling_param { kernel_size: 2 stride: 0 }"),
                 "bad.prototxt:4:", "key 'stride' in layer 'l' must be at least 1 (got 0)");
    expect_error(one_layer("Pooling", "pooling_param { stride: 2 }"),
                 "bad.prototxt:1:", "layer 'l' of type Pooling needs key 'kernel_size'");
}

TEST_F(ConfigValidation, SizesPastTwoToThe31AreRefusedNotWrappedToMinusOne) {
    for (const std::string field : {"group", "kernel_size", "pad", "stride", "num_output"}) {
        // The other required fields, each given once (kernel_size is repeated in Caffe's
        // proto, num_output is not).
        const std::string block =
            "convolution_param { " + std::string(field == "num_output" ? "" : "num_output: 2 ") +
            (field == "kernel_size" ? "" : "kernel_size: 3 ") + field + ": 4294967295 }";
        expect_error(one_layer("Convolution", block),
                     "bad.prototxt:", field + " 4294967295 is beyond 2^31 - 1");
    }
    expect_error(one_layer("Pooling", "pooling_param { kernel_size: 4294967295 }"),
                 "bad.prototxt:", "kernel_size 4294967295 is beyond 2^31 - 1");
    // Within int, a window past a million pixels is refused before any arithmetic on it.
    expect_error(one_layer("Pooling", "pooling_param { kernel_size: 2 pad: 2147483647 }"),
                 "bad.prototxt:4:", "key 'pad' in layer 'l' must be at most 1048576");
    expect_error(one_layer("Accuracy", "accuracy_param { top_k: 0 }"),
                 "bad.prototxt:4:", "key 'top_k' in layer 'l' must be at least 1 (got 0)");
}

TEST_F(ConfigValidation, FillersCaffeRefusesAreRefusedNotDrawnForever) {
    expect_error(one_layer("InnerProduct", "inner_product_param { num_output: 2\n"
                                           "    weight_filler { type: \"uniform\" min: 1 max: "
                                           "-1 } }"),
                 "bad.prototxt:5:",
                 "key 'max' in weight_filler of layer 'l': expected max >= min (got min 1, max "
                 "-1)");
    expect_error(one_layer("InnerProduct", "inner_product_param { num_output: 2\n"
                                           "    weight_filler { type: \"gaussian\" std: nan } }"),
                 "bad.prototxt:5:", "key 'std' in weight_filler of layer 'l'");
    expect_error(one_layer("InnerProduct", "inner_product_param { num_output: 2\n"
                                           "    bias_filler { type: \"gaussian\" std: -1 } }"),
                 "bad.prototxt:5:", "expected a standard deviation > 0 (got -1");
    expect_error(one_layer("InnerProduct", "inner_product_param { num_output: 2\n"
                                           "    weight_filler { type: \"bilinear\" } }"),
                 "bad.prototxt:5:", "unknown value 'bilinear' (valid: constant, uniform");
}

TEST_F(ConfigValidation, NanAndOutOfRangeRatiosAndMultipliersAreRefused) {
    for (const std::string ratio : {"nan", "1.5", "-0.1", "1"}) {
        expect_error(one_layer("Dropout", "dropout_param { dropout_ratio: " + ratio + " }"),
                     "bad.prototxt:4:", "key 'dropout_ratio' in layer 'l' must be in [0, 1)");
    }
    for (const std::string mult : {"nan", "-1", "inf"}) {
        expect_error(
            one_layer("InnerProduct",
                      "param { lr_mult: " + mult + " }\n  inner_product_param { num_output: 2 }"),
            "bad.prototxt:4:", "key 'param' in layer 'l': lr_mult must be a finite number");
    }
    expect_error(one_layer("BatchNorm", "batch_norm_param { eps: 0 }"),
                 "bad.prototxt:4:", "key 'eps' in layer 'l' must be > 0");
    expect_error(one_layer("LRN", "lrn_param { alpha: inf }"),
                 "bad.prototxt:4:", "key 'alpha' in layer 'l' must be a finite number");
}

TEST_F(ConfigValidation, DuplicateLayerNamesAreAConfigErrorNotAnAbort) {
    expect_error("layer {\n  name: \"a\"\n  type: \"ReLU\"\n}\n"
                 "layer {\n  name: \"a\"\n  type: \"InnerProduct\"\n"
                 "  inner_product_param { num_output: 2 }\n}\n",
                 "bad.prototxt:6:", "key 'name': layer name 'a' is used twice");
    // Layers without parameters may share a name, as Caffe allows (the MNIST autoencoder's two
    // losses are both 'loss').
    const fs::path losses = m_dir.path() / "losses.prototxt";
    std::ofstream(losses) << "layer { name: \"a\" type: \"ReLU\" }\n"
                             "layer { name: \"a\" type: \"Sigmoid\" }\n";
    EXPECT_NO_THROW(load_config(losses));
    // Across phases, as Caffe's train and test Data layers, a name may repeat.
    const fs::path fine = m_dir.path() / "fine.prototxt";
    std::ofstream(fine) << "layer { name: \"d\" type: \"Data\" top: \"data\" include { phase: "
                           "TRAIN }\n  data_param { source: \"x\" batch_size: 2 } }\n"
                           "layer { name: \"d\" type: \"Data\" top: \"data\" include { phase: "
                           "TEST }\n  data_param { source: \"y\" batch_size: 2 } }\n";
    EXPECT_NO_THROW(load_config(fine));
}

TEST_F(ConfigValidation, SolverValuesAreCheckedInTheSolverFile) {
    std::ofstream(m_dir.path() / "net.prototxt") << one_layer("ReLU", "");
    const std::string head = "net: \"net.prototxt\"\nbase_lr: 0.01\n";
    // Two test nets (Caffe's rule for two test_iter), the second one's count negative.
    std::string message = error_of("solver.prototxt", head + "test_iter: 2\ntest_iter: -3\n");
    EXPECT_EQ(message.rfind("solver.prototxt:3:", 0), 0U) << message;
    EXPECT_NE(message.find("a test net's test_iter must be at least 0 (got -3)"), std::string::npos)
        << message;
    message = error_of("solver.prototxt", head + "lr_policy: \"step\"\nstepsize: -5\n");
    EXPECT_EQ(message.rfind("solver.prototxt:4:1: key 'stepsize' in solver must be at least 0 "
                            "(got -5)",
                            0),
              0U)
        << message;
    message = error_of("solver.prototxt", head + "max_iter: -1\n");
    EXPECT_EQ(message.rfind("solver.prototxt:3:1: key 'max_iter' in solver must be at least 0", 0),
              0U)
        << message;
    message = error_of("solver.prototxt", head + "momentum: nan\n");
    EXPECT_NE(message.find("key 'momentum' in solver must be a finite number in [0, 1)"),
              std::string::npos)
        << message;
    message = error_of("solver.prototxt", head + "lr_policy: \"sigmoid\"\n");
    EXPECT_NE(message.find("unknown value 'sigmoid' (valid: fixed, step"), std::string::npos)
        << message;
    // An override is checked as the file is, and named as what it is.
    message = error_of("solver.prototxt", head, {"max_iter=-5"});
    EXPECT_EQ(message.rfind("solver.prototxt: --solver max_iter=-5: key 'max_iter' in solver must "
                            "be at least 0 (got -5)",
                            0),
              0U)
        << message;
}

TEST_F(ConfigValidation, YamlAndPrototxtGiveTheSameMessageFromTheSameValidator) {
    const std::string yaml =
        error_of("bad.yaml", "layers:\n  - {name: l, type: Convolution, num_output: 2,\n"
                             "     kernel_size: 3, stride: 0}\n");
    EXPECT_EQ(yaml, "bad.yaml:3:22: key 'stride' in layer 'l' must be at least 1 (got 0)");
    const std::string prototxt = error_of(
        "bad.prototxt",
        one_layer("Convolution", "convolution_param { num_output: 2 kernel_size: 3 stride: 0 }"));
    EXPECT_EQ(prototxt.substr(prototxt.find(": key")), yaml.substr(yaml.find(": key")));
    const std::string dropout =
        error_of("bad.yaml", "layers:\n  - {name: l, type: Dropout, dropout_ratio: .nan}\n");
    EXPECT_NE(dropout.find("bad.yaml:2:"), std::string::npos) << dropout;
    EXPECT_NE(dropout.find("must be in [0, 1) (got nan)"), std::string::npos) << dropout;
}

// Strings are written back as YAML (config.resolved.yaml, dltrain convert), which holds UTF-8
// only: every UTF-8 name reads back as it was, and anything else is refused where it is, not
// written as a config that reads back as another (found by tests/fuzz's net target).
TEST_F(ConfigValidation, StringsMustBeUtf8AndUtf8OnesReadBackFromYaml) {
    const auto net = [](const std::string& top) {
        return "layer {\n  name: \"in\"\n  type: \"Input\"\n  top: \"" + top +
               "\"\n  input_param { shape { dim: 1 dim: 2 } }\n}\n";
    };
    // Two-, three- and four-byte sequences at the edges of what UTF-8 allows.
    for (const std::string top : {"caf\xC3\xA9", "\xE2\x82\xAC\xEF\xBF\xBF", "\xF0\x9F\x98\x80",
                                  "\xF4\x8F\xBF\xBF", "\xC2\x80"}) {
        const fs::path file = m_dir.path() / "good.prototxt";
        std::ofstream(file) << net(top);
        const NetConfig config = load_config(file);
        EXPECT_EQ(config.layers.at(0).tops.at(0), top);
        const NetConfig again = parse_config(to_yaml(config), "again.yaml");
        EXPECT_EQ(again.layers.at(0).tops.at(0), top) << to_yaml(config);
    }
    // A Latin-1 byte, a lone continuation byte, a cut sequence, an overlong form, a surrogate,
    // a code point past U+10FFFF: each refused at the key, naming the byte.
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"caf\xE9", "byte 4 of it is 0xE9"},      {"a\x80", "byte 2 of it is 0x80"},
        {"\xE2\x82", "byte 1 of it is 0xE2"},     {"\xC0\x80", "byte 1 of it is 0xC0"},
        {"\xED\xA0\x80", "byte 1 of it is 0xED"}, {"\xF4\x90\x80\x80", "byte 1 of it is 0xF4"}};
    for (const auto& [top, said] : bad) {
        const std::string message = error_of("bad.prototxt", net(top));
        EXPECT_EQ(message.rfind("bad.prototxt:4:", 0), 0U) << message;
        EXPECT_NE(message.find("key 'top' in layer 'in': "), std::string::npos) << message;
        EXPECT_NE(message.find(said), std::string::npos) << message;
    }
}

TEST_F(ConfigValidation, DltrainCheckOfAZeroStridePrototxtExits3) {
    // It died of SIGFPE (a division by the stride) before the validator.
    dl_test::write_tiny_dataset(m_dir.path(), "train", 4, 8, 1);
    const fs::path file = m_dir.path() / "zero.prototxt";
    std::ofstream(file) << R"(layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "train-images-idx3-ubyte" batch_size: 2 } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c"
        convolution_param { num_output: 2 kernel_size: 3 stride: 0 } }
)";
    const auto result =
        dljob::test::run_shell(std::string(DLTRAIN_BINARY) + " check --config " + file.string());
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find("zero.prototxt:4:"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("key 'stride' in layer 'c' must be at least 1"), std::string::npos)
        << result.output;
}

} // namespace
} // namespace dl
