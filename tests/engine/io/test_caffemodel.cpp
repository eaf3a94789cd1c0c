// Caffe's .caffemodel weights both ways: a model exported by dltrain and read back is
// bit-identical; the V1 format of the 2014 model-zoo files (legacy 4-D dims) and V0 load; the
// fine-tuning rule keeps fillers for renamed or resized layers and lists them; bad files are
// refused naming what is wrong.
#include "engine_test_support.hpp"
#include "io/caffemodel.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>

#include <caffe.pb.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace dl {
namespace {
namespace fs = std::filesystem;
using dljob::test::run_shell;

class CaffeModel : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;
    NetConfig m_config = [] {
        NetConfig config = parse_config(dl_test::tiny_net_yaml(10), "tiny.yaml");
        for (auto& layer : config.layers) {
            layer.shape = {1, 8, 8};
        }
        return config;
    }();
    std::unique_ptr<Backend> m_backend = make_backend("cpu", 1);

    std::unique_ptr<Net> net(std::uint64_t seed) const {
        return std::make_unique<Net>(m_config, Phase::train, *m_backend, seed);
    }

    fs::path write(const std::string& name, const ::caffe::NetParameter& model) const {
        const fs::path file = m_dir.path() / name;
        std::ofstream out(file, std::ios::binary);
        model.SerializeToOstream(&out);
        return file;
    }

    static std::vector<std::vector<float>> values(const Net& n) {
        std::vector<std::vector<float>> out;
        for (const auto& param : n.params()) {
            out.push_back(param.tensor->read_data());
        }
        return out;
    }

    std::string error_of(const fs::path& file) const {
        auto target = net(9);
        try {
            (void)io::copy_caffemodel_weights(file, *target);
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config);
            return e.what();
        }
        ADD_FAILURE() << "no error for " << file;
        return {};
    }

    // A model of the net's weights in the V1 (or V0) format, read back into another net.
    void expect_legacy_model_reads(bool v0);
};

TEST_F(CaffeModel, WrittenAndReadBackBitForBit) {
    auto source = net(1);
    const fs::path first = m_dir.path() / "a.caffemodel";
    io::write_caffemodel(first, m_config, *source);
    auto target = net(2);
    ASSERT_NE(values(*source), values(*target)); // other seeds, other fillers
    const WeightsCopy copy = io::copy_caffemodel_weights(first, *target);
    EXPECT_EQ(copy.copied.size(), source->params().size());
    EXPECT_TRUE(copy.kept.empty());
    EXPECT_TRUE(copy.reshaped.empty());
    EXPECT_TRUE(copy.unused.empty());
    EXPECT_EQ(values(*source), values(*target));
    const fs::path second = m_dir.path() / "b.caffemodel";
    io::write_caffemodel(second, m_config, *target);
    EXPECT_EQ(dl_test::read_file(first), dl_test::read_file(second));
    // Caffe's layout: one layer per name with its type, blob 0 the weights in N-D shape.
    ::caffe::NetParameter model;
    std::ifstream in(first, std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
    ASSERT_GE(model.layer_size(), 1);
    EXPECT_EQ(model.layer(0).name(), "conv1");
    EXPECT_EQ(model.layer(0).type(), "Convolution");
    ASSERT_EQ(model.layer(0).blobs_size(), 2);
    EXPECT_EQ(model.layer(0).blobs(0).shape().dim_size(), 4);
    EXPECT_EQ(model.layer(0).blobs(0).shape().dim(0), 4);
}

// The 2014 model-zoo files: V1 `layers`, an enum type, and 4-D legacy dims (1 x 1 x N x K for an
// inner product's weights).
TEST_F(CaffeModel, ReadsTheV1FormatWithLegacyDims) {
    expect_legacy_model_reads(false);
}

// Before May 2014 (V0): each layer's name, type and blobs inside a `layer` of the V1 entry.
TEST_F(CaffeModel, ReadsTheV0Format) {
    expect_legacy_model_reads(true);
}

void CaffeModel::expect_legacy_model_reads(bool v0) {
    auto source = net(1);
    ::caffe::NetParameter model;
    std::string last;
    ::caffe::V1LayerParameter* layer = nullptr;
    for (const auto& param : source->params()) {
        const std::string name = param.name.substr(0, param.name.rfind('.'));
        const bool conv = name.rfind("conv", 0) == 0;
        if (layer == nullptr || last != name) {
            layer = model.add_layers();
            if (v0) {
                layer->mutable_layer()->set_name(name);
                layer->mutable_layer()->set_type(conv ? "conv" : "innerproduct");
            } else {
                layer->set_name(name);
                layer->set_type(conv ? ::caffe::V1LayerParameter::CONVOLUTION
                                     : ::caffe::V1LayerParameter::INNER_PRODUCT);
            }
            last = name;
        }
        ::caffe::BlobProto* blob = v0 ? layer->mutable_layer()->add_blobs() : layer->add_blobs();
        std::vector<int> dims = param.tensor->shape();
        while (dims.size() < 4) {
            dims.insert(dims.begin(), 1);
        }
        blob->set_num(dims[0]);
        blob->set_channels(dims[1]);
        blob->set_height(dims[2]);
        blob->set_width(dims[3]);
        const auto data = param.tensor->read_data();
        blob->mutable_data()->Add(data.begin(), data.end());
    }
    auto target = net(2);
    const WeightsCopy copy =
        io::copy_caffemodel_weights(write("legacy.caffemodel", model), *target);
    EXPECT_EQ(copy.copied.size(), source->params().size());
    EXPECT_EQ(values(*source), values(*target));
}

// Fine-tuning as the source documents do it: a classifier of another size keeps its filler and
// is listed; a layer the net lacks is listed as unused; the rest is copied.
TEST_F(CaffeModel, ResizedAndMissingLayersKeepTheirFillersAndAreListed) {
    auto source = net(1);
    ::caffe::NetParameter model;
    for (const auto& param : source->params()) {
        const std::string name = param.name.substr(0, param.name.rfind('.'));
        if (name == "ip2") {
            continue;
        }
        if (model.layer_size() == 0 || model.layer(model.layer_size() - 1).name() != name) {
            model.add_layer()->set_name(name);
        }
        ::caffe::BlobProto* blob = model.mutable_layer(model.layer_size() - 1)->add_blobs();
        for (const int dim : param.tensor->shape()) {
            blob->mutable_shape()->add_dim(dim);
        }
        const auto data = param.tensor->read_data();
        blob->mutable_data()->Add(data.begin(), data.end());
    }
    ::caffe::LayerParameter* classifier = model.add_layer(); // 5 classes where the net has 3
    classifier->set_name("ip2");
    ::caffe::BlobProto* weights = classifier->add_blobs();
    weights->mutable_shape()->add_dim(5);
    weights->mutable_shape()->add_dim(16);
    weights->mutable_data()->Resize(80, 0.5F);
    ::caffe::LayerParameter* old = model.add_layer();
    old->set_name("fc_old");
    old->add_blobs()->mutable_shape()->add_dim(1);
    old->mutable_blobs(0)->add_data(1.0F);

    auto target = net(2);
    const auto fillers = values(*target);
    const WeightsCopy copy =
        io::copy_caffemodel_weights(write("finetune.caffemodel", model), *target);
    EXPECT_EQ(copy.reshaped, std::vector<std::string>{"ip2.0: 5x16 in the file, 3x16 here"});
    EXPECT_EQ(copy.kept, std::vector<std::string>{"ip2.1"});
    EXPECT_EQ(copy.unused, std::vector<std::string>{"fc_old.0"});
    const auto after = values(*target);
    const auto& params = target->params();
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (params[i].name.rfind("ip2.", 0) == 0) {
            EXPECT_EQ(after[i], fillers[i]) << params[i].name;
        } else {
            EXPECT_EQ(after[i], values(*source)[i]) << params[i].name;
        }
    }
}

TEST_F(CaffeModel, BadFilesAreRefusedNamingWhatIsWrong) {
    const fs::path garbage = m_dir.path() / "garbage.caffemodel";
    std::ofstream(garbage, std::ios::binary) << std::string("\xff\xff\xff\xff\x0f", 5);
    EXPECT_NE(error_of(garbage).find("is not a Caffe model"), std::string::npos);

    ::caffe::NetParameter both;
    both.add_layers()->set_name("conv1");
    both.add_layer()->set_name("conv1");
    EXPECT_NE(error_of(write("both.caffemodel", both)).find("both the current and the V1"),
              std::string::npos);

    ::caffe::NetParameter short_blob;
    ::caffe::LayerParameter* conv = short_blob.add_layer();
    conv->set_name("conv1");
    ::caffe::BlobProto* blob = conv->add_blobs();
    for (const int dim : {4, 1, 3, 3}) {
        blob->mutable_shape()->add_dim(dim);
    }
    blob->add_data(1.0F);
    const std::string message = error_of(write("short.caffemodel", short_blob));
    EXPECT_NE(message.find("blob conv1.0 has shape 4x1x3x3 but 1 values"), std::string::npos)
        << message;

    ::caffe::NetParameter other;
    other.add_layer()->set_name("unrelated");
    other.mutable_layer(0)->add_blobs()->add_data(1.0F);
    EXPECT_NE(error_of(write("other.caffemodel", other)).find("has no parameter of this network"),
              std::string::npos);

    const fs::path fifo = m_dir.path() / "fifo.caffemodel";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_NE(error_of(fifo).find("not a regular file"), std::string::npos);
}

// Counted before they are parsed: an empty layer is 3 bytes in the file and about a kilobyte
// parsed (20 MB of them once took 4.3 GB), an empty blob 2 bytes.
TEST_F(CaffeModel, MoreLayersOrBlobsThanAnyNetHasAreRefusedUnparsed) {
    std::string layers;
    for (int i = 0; i < 100'001; ++i) {
        layers += "\xa2\x06"; // field 100 (layer), length-delimited
        layers += '\0';       // empty
    }
    const fs::path many_layers = m_dir.path() / "layers.caffemodel";
    std::ofstream(many_layers, std::ios::binary) << layers;
    std::string message = error_of(many_layers);
    EXPECT_NE(message.find("more than 100000 layers"), std::string::npos) << message;

    std::string blobs;
    for (int i = 0; i < 1'000'001; ++i) {
        blobs += "\x3a"; // LayerParameter field 7 (blobs), length-delimited
        blobs += '\0';
    }
    std::string one_layer = "\xa2\x06"; // field 100, its length as a varint, then the blobs
    for (std::size_t n = blobs.size();; n >>= 7U) {
        one_layer += static_cast<char>((n & 0x7FU) | (n >= 0x80 ? 0x80U : 0U));
        if (n < 0x80) {
            break;
        }
    }
    const fs::path many_blobs = m_dir.path() / "blobs.caffemodel";
    std::ofstream(many_blobs, std::ios::binary) << one_layer << blobs;
    message = error_of(many_blobs);
    EXPECT_NE(message.find("more than 1000000 blobs"), std::string::npos) << message;

    // The same blobs inside a V0 layer (V0LayerParameter field 50), itself inside a V1 entry.
    std::string v0_blobs;
    for (int i = 0; i < 1'000'001; ++i) {
        v0_blobs += "\x92\x03"; // field 50, length-delimited
        v0_blobs += '\0';
    }
    const auto delimited = [](std::string tag, const std::string& body) {
        for (std::size_t n = body.size();; n >>= 7U) {
            tag += static_cast<char>((n & 0x7FU) | (n >= 0x80 ? 0x80U : 0U));
            if (n < 0x80) {
                break;
            }
        }
        return tag + body;
    };
    const fs::path v0 = m_dir.path() / "v0_blobs.caffemodel";
    std::ofstream(v0, std::ios::binary) << delimited("\x12", delimited("\x0a", v0_blobs));
    message = error_of(v0);
    EXPECT_NE(message.find("more than 1000000 blobs"), std::string::npos) << message;
}

// Through the binary: export, then fine-tune and test from the .caffemodel.
TEST_F(CaffeModel, DltrainExportsTrainsAndTestsWithCaffeWeights) {
    const fs::path config = dl_test::make_tiny_workspace(m_dir.path(), 20);
    const std::string dltrain = DLTRAIN_BINARY;
    auto result =
        run_shell(dltrain + " train --device cpu --config " + config.string() + " --run-dir " +
                  (m_dir.path() / "run").string() + " --threads 1 --deadline none");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const fs::path checkpoint = m_dir.path() / "run" / "checkpoints" / "iter_00000020.ckpt";
    const fs::path model = m_dir.path() / "tiny.caffemodel";
    result = run_shell(dltrain + " export --config " + config.string() + " --weights " +
                       checkpoint.string() + " --caffemodel " + model.string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto test_with = [&](const fs::path& weights) {
        auto tested = run_shell(dltrain + " test --device cpu --config " + config.string() +
                                " --weights " + weights.string() + " --threads 1 2>/dev/null");
        EXPECT_EQ(tested.exit_code, 0) << tested.output;
        // The accuracy and loss of the line, not its iteration (a .caffemodel has none).
        return tested.output.substr(0, tested.output.find("\"iter\""));
    };
    EXPECT_EQ(test_with(model), test_with(checkpoint));
    result = run_shell(dltrain + " train --device cpu --config " + config.string() + " --run-dir " +
                       (m_dir.path() / "tuned").string() + " --weights " + model.string() +
                       " --max-iter 5 --threads 1 --deadline none");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("dltrain: 6 parameters from " + model.string()), std::string::npos)
        << result.output;
}

// Weights from PyTorch, written as a .caffemodel by Caffe's Python protobuf (caffe_pb2, compiled
// by protoc from engine/proto/caffe.proto, as Caffe's own Python tools use it): the net that
// loads them gives PyTorch's logits, loss and accuracy on a batch, to 1e-5. Where Debian's
// python3-torch is installed (setup.sh --bench) the files are made afresh; elsewhere (CI) the
// test reads the ones parity/caffemodel_parity.py wrote into parity/caffemodel/, as LayerParity
// reads its PyTorch fixture.
TEST(CaffeModelParity, PyTorchWeightsWrittenByCaffesProtobufGiveTorchsOutputs) {
    dl_test::TempDir dir;
    fs::path files = fs::path(DLJOB_SOURCE_DIR) / "tests/engine/parity/caffemodel";
    nlohmann::json torch;
    if (run_shell("/usr/bin/python3 -c 'import torch, numpy, google.protobuf' 2>&1").exit_code ==
        0) {
        const std::string proto_dir = std::string(DLJOB_SOURCE_DIR) + "/engine/proto";
        const auto protoc =
            run_shell("protoc -I " + proto_dir + " --python_out=" + dir.path().string() + " " +
                      proto_dir + "/caffe.proto");
        ASSERT_EQ(protoc.exit_code, 0) << protoc.output;
        const auto made =
            run_shell("/usr/bin/python3 " + std::string(DLJOB_SOURCE_DIR) +
                      "/tests/engine/parity/caffemodel_parity.py " + dir.path().string());
        ASSERT_EQ(made.exit_code, 0) << made.output;
        torch = nlohmann::json::parse(made.output.substr(made.output.rfind('{')));
        files = dir.path();
    } else {
        SCOPED_TRACE("no python3-torch: the checked-in files of parity/caffemodel/");
        torch = nlohmann::json::parse(dl_test::read_file(files / "torch.json"));
    }

    NetConfig config = parse_config(R"(name: parity
layers:
  - {name: data, type: Data, top: [data, label], source: x, label_source: x, batch_size: 16,
     scale: 0.00390625, shape: [2, 8, 8]}
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 5, kernel_size: 3,
     pad: 1}
  - {name: relu1, type: ReLU, bottom: conv1, top: conv1}
  - {name: pool1, type: Pooling, bottom: conv1, top: pool1, pool: max, kernel_size: 2, stride: 2}
  - {name: ip1, type: InnerProduct, bottom: pool1, top: ip1, num_output: 12}
  - {name: tanh1, type: TanH, bottom: ip1, top: ip1}
  - {name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 4}
  - {name: accuracy, type: Accuracy, bottom: [ip2, label], top: accuracy, phase: test}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}
)",
                                    dir.path() / "parity.yaml");
    const std::unique_ptr<Backend> backend = make_backend("cpu", 1);
    Net net(config, Phase::test, *backend, 1);
    const WeightsCopy copy = io::copy_caffemodel_weights(files / "model.caffemodel", net);
    EXPECT_EQ(copy.copied.size(), 6U);
    EXPECT_TRUE(copy.kept.empty());
    EXPECT_TRUE(copy.reshaped.empty());

    const std::string pixels = dl_test::read_file(files / "pixels.u8");
    const std::string labels = dl_test::read_file(files / "labels.u8");
    ASSERT_EQ(pixels.size(), 16U * 2 * 8 * 8);
    ASSERT_EQ(labels.size(), 16U);
    std::vector<float> data(pixels.size());
    for (std::size_t i = 0; i < pixels.size(); ++i) {
        data[i] = static_cast<float>(static_cast<unsigned char>(pixels[i])) * 0.00390625F;
    }
    std::vector<float> label_values(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i) {
        label_values[i] = static_cast<float>(static_cast<unsigned char>(labels[i]));
    }
    net.inputs().front().data->write_data(data.data());
    net.inputs().front().labels->write_data(label_values.data());
    const float loss = net.forward();

    const std::vector<float> logits = net.blob("ip2")->read_data();
    const auto expected = torch["logits"].get<std::vector<double>>();
    ASSERT_EQ(logits.size(), expected.size());
    double max_diff = 0.0;
    double max_ref = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(logits[i]) - expected[i]));
        max_ref = std::max(max_ref, std::fabs(expected[i]));
    }
    ASSERT_GT(max_ref, 0.1); // logits that say something
    EXPECT_LE(max_diff, 1e-5 * max_ref) << "max |dltrain - torch| " << max_diff;
    const double torch_loss = torch["loss"].get<double>();
    EXPECT_NEAR(loss, torch_loss, 1e-5 * std::fabs(torch_loss));
    EXPECT_EQ(net.blob("accuracy")->read_data().at(0),
              static_cast<float>(torch["accuracy"].get<double>()));
}

} // namespace
} // namespace dl
