// Caffe's initial weights: with the same random_seed, dltrain's fillers draw what Caffe draws.
// The expected values come from Boost.Random called the way Caffe's math_functions.cpp calls it
// (boost::mt19937, variate_generator, uniform_real up to nextafter(b), normal_distribution), in
// the order Caffe's Net::Init reaches them.

#include "net/caffe_random.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>

#include <boost/math/special_functions/next.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_real.hpp>
#include <boost/random/variate_generator.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace dl {
namespace {

// caffe_rng_uniform from Caffe's src/caffe/util/math_functions.cpp.
std::vector<float> caffe_rng_uniform(boost::mt19937& rng, int n, float a, float b) {
    boost::uniform_real<float> distribution(
        a, boost::math::nextafter<float>(b, std::numeric_limits<float>::max()));
    boost::variate_generator<boost::mt19937*, boost::uniform_real<float>> generator(&rng,
                                                                                    distribution);
    std::vector<float> out(static_cast<std::size_t>(n));
    for (float& value : out) {
        value = generator();
    }
    return out;
}

// caffe_rng_gaussian, same file.
std::vector<float> caffe_rng_gaussian(boost::mt19937& rng, int n, float mean, float sigma) {
    boost::normal_distribution<float> distribution(mean, sigma);
    boost::variate_generator<boost::mt19937*, boost::normal_distribution<float>> generator(
        &rng, distribution);
    std::vector<float> out(static_cast<std::size_t>(n));
    for (float& value : out) {
        value = generator();
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

using Bounds = std::vector<std::pair<float, float>>;

// Draws `count` values for each pair of parameters, one pair after another, from Caffe's call
// and from ours on streams seeded alike: every value bit-identical, the streams still in step.
template <typename CaffeDraw, typename OurDraw>
void expect_same_draws(std::uint32_t seed, int count, const Bounds& params, CaffeDraw caffe_draw,
                       OurDraw our_draw) {
    boost::mt19937 caffe(seed);
    std::mt19937 ours(seed);
    for (const auto& [a, b] : params) {
        const std::vector<float> expected = caffe_draw(caffe, count, a, b);
        std::vector<float> got(expected.size());
        our_draw(ours, a, b, got.data(), got.size());
        EXPECT_TRUE(same_bits(got, expected)) << "(" << a << ", " << b << ")";
    }
    EXPECT_EQ(ours(), caffe()) << "the two streams drifted apart";
}

TEST(CaffeRandom, UniformDrawsCaffesNumbers) {
    expect_same_draws(1701, 5000,
                      {{-0.34641016F, 0.34641016F}, {0.0F, 1.0F}, {-2.5F, 7.0F}, {3.0F, 3.0F}},
                      caffe_rng_uniform, caffe_uniform);
}

TEST(CaffeRandom, GaussianDrawsCaffesNumbers) {
    expect_same_draws(37, 20000, {{0.0F, 0.01F}, {1.5F, 2.0F}}, caffe_rng_gaussian, caffe_gaussian);
}

// A LeNet-shaped net: Caffe's Net::Init sets the layers up in order; the data layer takes one
// draw for its prefetch thread's seed, then each layer fills its weights and then its bias.
TEST(CaffeRandom, ANetStartsFromCaffesWeightsForTheSameSeed) {
    const NetConfig config = parse_config(
        "layers:\n"
        "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
        "     batch_size: 2, shape: [1, 12, 12]}\n"
        "  - {name: conv1, type: Convolution, bottom: data, top: c1, num_output: 4,\n"
        "     kernel_size: 5, weight_filler: {type: xavier}, bias_filler: {type: constant}}\n"
        "  - {name: conv2, type: Convolution, bottom: c1, top: c2, num_output: 3,\n"
        "     kernel_size: 3, weight_filler: {type: msra},\n"
        "     bias_filler: {type: uniform, min: -0.5, max: 0.25}}\n"
        "  - {name: ip, type: InnerProduct, bottom: c2, top: ip, num_output: 5,\n"
        "     weight_filler: {type: gaussian, std: 0.01}, bias_filler: {type: xavier}}\n"
        "  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}\n",
        "caffe.yaml");
    auto backend = make_backend("cpu", 1);
    const Net net(config, Phase::train, *backend, 1701);

    boost::mt19937 caffe(1701);
    caffe(); // InternalThread::StartInternalThread: the data layer's prefetch seed
    const std::vector<std::vector<float>> expected = {
        caffe_rng_uniform(caffe, 4 * 25, -std::sqrt(3.0F / 25.0F), std::sqrt(3.0F / 25.0F)),
        std::vector<float>(4, 0.0F),
        caffe_rng_gaussian(caffe, 3 * 4 * 9, 0.0F, std::sqrt(2.0F / 36.0F)),
        caffe_rng_uniform(caffe, 3, -0.5F, 0.25F),
        caffe_rng_gaussian(caffe, 5 * 3 * 6 * 6, 0.0F, 0.01F),
        // A bias is one axis: Caffe's xavier takes fan_in = count / shape(0) = 1.
        caffe_rng_uniform(caffe, 5, -std::sqrt(3.0F), std::sqrt(3.0F)),
    };
    ASSERT_EQ(net.params().size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(same_bits(net.params()[i].tensor->read_data(), expected[i]))
            << net.params()[i].name;
    }
}

TEST(CaffeRandom, FillerBoundsCaffeRefusesAreConfigErrors) {
    const auto error_for = [](const std::string& filler) {
        try {
            parse_config("layers:\n"
                         "  - name: ip\n"
                         "    type: InnerProduct\n"
                         "    num_output: 2\n"
                         "    weight_filler: " +
                             filler + "\n",
                         "fill.yaml");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string uniform = error_for("{type: uniform, min: 1, max: -1}");
    EXPECT_NE(uniform.find("fill.yaml:5"), std::string::npos) << uniform;
    EXPECT_NE(uniform.find("'max'"), std::string::npos) << uniform;
    EXPECT_NE(uniform.find("max >= min"), std::string::npos) << uniform;
    const std::string gaussian = error_for("{type: gaussian, std: 0}");
    EXPECT_NE(gaussian.find("fill.yaml:5"), std::string::npos) << gaussian;
    EXPECT_NE(gaussian.find("'std'"), std::string::npos) << gaussian;
    EXPECT_EQ(error_for("{type: uniform, min: -1, max: 1}"), "no error");
}

} // namespace
} // namespace dl
