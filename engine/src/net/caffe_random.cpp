// The one file that includes Boost.Random: Caffe fills its weights through it, and matching
// Caffe's initial weights bit for bit means calling the same distribution code, not a copy of it.

#include "net/caffe_random.hpp"

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <limits>

namespace dl {

void caffe_uniform(std::mt19937& rng, float low, float high, float* out, std::size_t n) {
    // Caffe widens the bound by one ulp so that 'high' itself can be drawn.
    boost::random::uniform_real_distribution<float> uniform(
        low, std::nextafter(high, std::numeric_limits<float>::max()));
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = uniform(rng);
    }
}

void caffe_gaussian(std::mt19937& rng, float mean, float stddev, float* out, std::size_t n) {
    boost::random::normal_distribution<float> normal(mean, stddev);
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = normal(rng);
    }
}

void caffe_bernoulli_mask(std::mt19937& rng, float p, float* values, std::size_t n) {
    boost::random::bernoulli_distribution<float> keep(p);
    for (std::size_t i = 0; i < n; ++i) {
        values[i] *= keep(rng) ? 1.0F : 0.0F;
    }
}

} // namespace dl
