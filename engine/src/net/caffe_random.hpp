// Caffe's random draws (fillers), so that a config carrying Caffe's random_seed starts from the
// very weights Caffe would draw: the same Mersenne Twister (std::mt19937 and boost::mt19937 are
// one algorithm with one seeding) through the same Boost.Random distributions Caffe calls.
#pragma once

#include <cstddef>
#include <random>

namespace dl {

// caffe_rng_uniform(n, low, high): Boost's uniform_real over [low, nextafter(high)), drawn in
// float, with Boost's redraw when rounding lands on the upper bound.
void caffe_uniform(std::mt19937& rng, float low, float high, float* out, std::size_t n);

// caffe_rng_gaussian(n, mean, stddev): Boost's normal_distribution (a ziggurat).
void caffe_gaussian(std::mt19937& rng, float mean, float stddev, float* out, std::size_t n);

// GaussianFiller's sparse mask: caffe_rng_bernoulli(n, p) drawn, each value kept where it is 1.
void caffe_bernoulli_mask(std::mt19937& rng, float p, float* values, std::size_t n);

} // namespace dl
